package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/atrium-dev/atrium/backend/acl"
	"github.com/atrium-dev/atrium/backend/memory/versions"
)

// This file edits and deletes roles (issue 24 item 1; docs/PROTOCOL.md
// profiles.update and profiles.delete): UpdateRole rewrites a role's
// config.md (its description, capabilities and persona), DeleteRole moves
// its folder to the archive or removes it.

// ArchivedRolesDir is where DeleteRole keeps a deleted role's memory: not
// indexed, not searched, not served (like ArchivedSessionsDir).
const ArchivedRolesDir = "memory/archive/roles"

// UpdateRoleRequest changes a role's config.md (SPEC §5.2). A nil field is
// left as it is. Description is one line (as CreateRoleRequest's; it also
// replaces the body's lines that were the old description, as the template
// put it under "Role", unless Persona is given); Capabilities replace the
// routing keywords; Persona replaces the whole body (the system prompt of
// the role's runs). BaseVersion, when set, is config.md's version the
// caller saw: a file changed since is ErrConflict. Writer writes the file
// (default admin).
type UpdateRoleRequest struct {
	Role         string    `json:"role"`
	Description  *string   `json:"description,omitempty"`
	Capabilities *[]string `json:"capabilities,omitempty"`
	Persona      *string   `json:"persona,omitempty"`
	BaseVersion  string    `json:"baseVersion,omitempty"`
	Writer       string    `json:"-"`
}

// UpdateRoleResult is UpdateRole's answer: config.md's path and version
// after the write, and Changed, the parts that differ ("description",
// "capabilities", "persona"; empty when the file was already so, and then
// nothing is written).
type UpdateRoleResult struct {
	Role    string   `json:"role"`
	Path    string   `json:"path"`
	Version string   `json:"version"`
	Changed []string `json:"changed"`
}

// roleDir returns the role's folder (workspace-relative) after checking
// the name (ErrInvalidInput) and that the folder exists as a real folder
// (ErrNotFound, ErrInvalidPath for a symlink or a file).
func (m *Manager) roleDir(role string) (string, error) {
	if err := acl.ValidateRole(role); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	rel := "memory/roles/" + role
	info, err := os.Lstat(filepath.Join(m.ws, filepath.FromSlash(rel)))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: no role %s (%s)", ErrNotFound, role, rel)
	case err != nil:
		return "", err
	case !info.IsDir():
		return "", fmt.Errorf("%w: %s is not a folder", ErrInvalidPath, rel)
	}
	return rel, nil
}

// cleanDescription is CreateRole's rule for a description: one line,
// required, valid UTF-8 without control characters, at most
// MaxDescriptionChars characters.
func cleanDescription(d string) (string, error) {
	desc := strings.Join(strings.Fields(d), " ")
	switch {
	case desc == "":
		return "", fmt.Errorf("%w: a description is required", ErrInvalidInput)
	case !utf8.ValidString(desc) || strings.ContainsFunc(desc, unicode.IsControl):
		return "", fmt.Errorf("%w: the description is not plain text", ErrInvalidInput)
	case utf8.RuneCountInString(desc) > MaxDescriptionChars:
		return "", fmt.Errorf("%w: description longer than %d characters", ErrInvalidInput, MaxDescriptionChars)
	}
	return desc, nil
}

// cleanCapabilities is CreateRole's rule for capabilities: trimmed, no
// empties or repeats, each plain text of at most 100 characters.
func cleanCapabilities(in []string) ([]string, error) {
	out := []string{}
	for _, c := range in {
		c = strings.TrimSpace(c)
		if c == "" || slices.Contains(out, c) {
			continue
		}
		if !utf8.ValidString(c) || strings.ContainsFunc(c, unicode.IsControl) || utf8.RuneCountInString(c) > 100 {
			return nil, fmt.Errorf("%w: capability %q", ErrInvalidInput, c)
		}
		out = append(out, c)
	}
	return out, nil
}

// UpdateRole rewrites memory/roles/<role>/config.md as r asks, through
// Write (replace, with r.BaseVersion): indexed, versioned, OnChange. The
// front matter keeps its other keys and their order. The running
// instances of the role read the persona at each run (the wiring), so the
// change counts from their next turn.
//
// Errors: ErrInvalidInput (role name, description, capabilities, a
// persona that is too large or binary, a config.md without a readable
// front matter), ErrNotFound (no such role, or no config.md), Write's
// (ErrConflict for a stale BaseVersion, ErrForbidden …).
func (m *Manager) UpdateRole(ctx context.Context, r UpdateRoleRequest) (UpdateRoleResult, error) {
	if m.closed.Load() {
		return UpdateRoleResult{}, ErrClosed
	}
	dir, err := m.roleDir(r.Role)
	if err != nil {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w", r.Role, err)
	}
	res := UpdateRoleResult{Role: r.Role, Path: dir + "/config.md", Changed: []string{}}
	var desc string
	if r.Description != nil {
		if desc, err = cleanDescription(*r.Description); err != nil {
			return UpdateRoleResult{}, fmt.Errorf("update role %s: %w", r.Role, err)
		}
	}
	var caps []string
	if r.Capabilities != nil {
		if caps, err = cleanCapabilities(*r.Capabilities); err != nil {
			return UpdateRoleResult{}, fmt.Errorf("update role %s: %w", r.Role, err)
		}
	}
	if r.Persona != nil {
		if err := checkText("persona", *r.Persona); err != nil {
			return UpdateRoleResult{}, fmt.Errorf("update role %s: %w", r.Role, err)
		}
	}
	writer := r.Writer
	if writer == "" {
		writer = AdminWriter
	}
	data, err := os.ReadFile(filepath.Join(m.ws, filepath.FromSlash(res.Path)))
	if errors.Is(err, fs.ErrNotExist) {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w: %s does not exist", r.Role, ErrNotFound, res.Path)
	}
	if err != nil {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w", r.Role, err)
	}
	text := strings.ReplaceAll(strings.TrimPrefix(string(data), "\uFEFF"), "\r\n", "\n")
	fm, body, _, _, err := ParseFrontMatter(text)
	if err != nil {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w: %s: %v", r.Role, ErrInvalidInput, res.Path, err)
	}
	fmText, _ := frontMatter(text)
	var doc yaml.Node
	if strings.TrimSpace(fmText) != "" {
		if err := yaml.Unmarshal([]byte(fmText), &doc); err != nil {
			return UpdateRoleResult{}, fmt.Errorf("update role %s: %w: %s: %v", r.Role, ErrInvalidInput, res.Path, err)
		}
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
		setKey(doc.Content[0], "type", &yaml.Node{Kind: yaml.ScalarNode, Value: "role"})
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w: %s: the front matter is not a mapping", r.Role, ErrInvalidInput, res.Path)
	}
	if r.Description != nil && desc != fm.Description {
		setKey(root, "description", &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: desc})
		res.Changed = append(res.Changed, "description")
		if r.Persona == nil && strings.TrimSpace(fm.Description) != "" {
			// The template wrote the description as a line of the body.
			lines := strings.Split(body, "\n")
			for i, l := range lines {
				if strings.TrimSpace(l) == fm.Description {
					lines[i] = desc
				}
			}
			body = strings.Join(lines, "\n")
		}
	}
	if r.Capabilities != nil && !slices.Equal(caps, fm.Capabilities) {
		list := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, c := range caps {
			list.Content = append(list.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: c})
		}
		setKey(root, "capabilities", list)
		res.Changed = append(res.Changed, "capabilities")
	}
	if r.Persona != nil {
		p := strings.ReplaceAll(*r.Persona, "\r\n", "\n")
		if strings.TrimSpace(p) != strings.TrimSpace(body) {
			body = strings.TrimRight(p, "\n") + "\n"
			res.Changed = append(res.Changed, "persona")
		}
	}
	// A stale base is refused here (a plain replace would keep this write
	// and save the other side as a conflict); a change that slips in
	// between is still caught by Write's own check, which then keeps the
	// replaced text in a conflict record, so nothing is lost.
	v, err := m.Version(ctx, res.Path)
	if err != nil {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w", r.Role, err)
	}
	if base, perr := versions.Parse(r.BaseVersion); perr != nil {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w: baseVersion: %v", r.Role, ErrInvalidInput, perr)
	} else if cur, _ := versions.Parse(v); !base.IsZero() && versions.Compare(base, cur) != versions.Equal {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w: %s is at version %s, not %s (it changed since it was read)", r.Role, ErrConflict, res.Path, v, r.BaseVersion)
	}
	if len(res.Changed) == 0 {
		res.Version = v
		return res, nil
	}
	y, err := yaml.Marshal(&doc)
	if err != nil {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w", r.Role, err)
	}
	out := "---\n" + string(y) + "---\n" + body
	if _, _, _, _, err := ParseFrontMatter(out); err != nil {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w: %v", r.Role, ErrInvalidInput, err)
	}
	wr, err := m.Write(ctx, WriteRequest{Path: res.Path, Content: out, Mode: WriteReplace, BaseVersion: r.BaseVersion, Writer: writer})
	if err != nil {
		return UpdateRoleResult{}, fmt.Errorf("update role %s: %w", r.Role, err)
	}
	if wr.Conflict != nil {
		// A stale base on a replace keeps the last write and saves the
		// other side (Write's rule); for a role's settings the person
		// asked for theirs to win only over what they had seen.
		m.log.Warn("memory role updated over a newer config", "role", r.Role, "conflict", wr.Conflict.ID)
	}
	res.Version = wr.Version
	m.log.Info("memory role updated", "role", r.Role, "changed", strings.Join(res.Changed, ","))
	return res, nil
}

// setKey sets key in a YAML mapping to v, in place when it exists, else
// at the end.
func setKey(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
}

// DeleteRoleRequest deletes a role. DeleteMemory removes its folder for
// good; otherwise (the default) the folder is moved to
// ArchivedRolesDir/<role> (<role>-1 … when taken). DryRun changes
// nothing and says what would be done (the UI's warning).
type DeleteRoleRequest struct {
	Role         string `json:"role"`
	DeleteMemory bool   `json:"deleteMemory,omitempty"`
	DryRun       bool   `json:"dryRun,omitempty"`
}

// DeleteRoleResult says what DeleteRole did (or, DryRun, would do): the
// role's folder (Path), its regular files (Files, every file; Notes, the
// indexed Markdown among them) and their size (Bytes), whether they were
// kept (Kept; ArchivePath, where; empty for DryRun) or removed.
type DeleteRoleResult struct {
	Role        string `json:"role"`
	Path        string `json:"path"`
	Files       int    `json:"files"`
	Notes       int    `json:"notes"`
	Bytes       int64  `json:"bytes"`
	Kept        bool   `json:"kept"`
	ArchivePath string `json:"archivePath,omitempty"`
	DryRun      bool   `json:"dryRun,omitempty"`
}

// DeleteRole removes a role from the workspace (issue 24 item 1): its
// folder memory/roles/<role>/ leaves memory — moved whole to the archive
// (one rename: its files kept, no longer indexed, searched or served;
// moving it back restores the role) or, with DeleteMemory, removed. The
// index drops the role's files and OnChange fires (reason "archive" or
// "delete"). memory/.acl is left as it is (its rules for the name apply
// again to a role created later under it). Role main is never deleted.
//
// Errors: ErrInvalidInput (role name, main), ErrNotFound, ErrInvalidPath
// (the folder or the archive on the way is a symlink or a file), ErrClosed.
func (m *Manager) DeleteRole(ctx context.Context, r DeleteRoleRequest) (DeleteRoleResult, error) {
	if m.closed.Load() {
		return DeleteRoleResult{}, ErrClosed
	}
	if r.Role == MainRole {
		return DeleteRoleResult{}, fmt.Errorf("delete role %s: %w: role main is the app's own and cannot be deleted", r.Role, ErrInvalidInput)
	}
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	dirRel, err := m.roleDir(r.Role)
	if err != nil {
		return DeleteRoleResult{}, fmt.Errorf("delete role %s: %w", r.Role, err)
	}
	src := filepath.Join(m.ws, filepath.FromSlash(dirRel))
	res := DeleteRoleResult{Role: r.Role, Path: dirRel, Kept: !r.DeleteMemory, DryRun: r.DryRun}
	var rels []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, rerr := filepath.Rel(m.ws, p)
			if rerr != nil {
				return rerr
			}
			rel = filepath.ToSlash(rel)
			rels = append(rels, rel)
			res.Files++
			if classify(rel).indexed {
				res.Notes++
			}
			if info, ierr := d.Info(); ierr == nil {
				res.Bytes += info.Size()
			}
		}
		return nil
	})
	if err != nil {
		return DeleteRoleResult{}, fmt.Errorf("delete role %s: %w", r.Role, err)
	}
	if r.DryRun {
		return res, nil
	}
	sort.Strings(rels)
	// Every file's write lock across the move (as ArchiveSession).
	unlock := m.locks.lockAll(rels...)
	defer unlock()
	if r.DeleteMemory {
		if err := os.RemoveAll(src); err != nil {
			return DeleteRoleResult{}, fmt.Errorf("delete role %s: remove %s: %w", r.Role, dirRel, err)
		}
		syncDir(filepath.Dir(src))
		m.log.Info("memory role deleted with its memory", "role", r.Role, "path", dirRel, "files", res.Files)
		m.dropIndexedAs(ctx, rels, "delete")
		return res, nil
	}
	arch, err := mkdirNoLinks(m.ws, ArchivedRolesDir)
	if err != nil {
		return DeleteRoleResult{}, fmt.Errorf("delete role %s: %w", r.Role, err)
	}
	name := r.Role
	for i := 1; ; i++ {
		if _, err := os.Lstat(filepath.Join(arch, name)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if i > 10000 {
			return DeleteRoleResult{}, fmt.Errorf("delete role %s: no free name in %s", r.Role, ArchivedRolesDir)
		}
		name = r.Role + "-" + strconv.Itoa(i)
	}
	if err := os.Rename(src, filepath.Join(arch, name)); err != nil {
		return DeleteRoleResult{}, fmt.Errorf("delete role %s: move to %s: %w", r.Role, ArchivedRolesDir, err)
	}
	syncDir(arch)
	syncDir(filepath.Dir(src))
	res.ArchivePath = ArchivedRolesDir + "/" + name
	m.log.Info("memory role deleted, its memory archived", "role", r.Role, "from", dirRel, "to", res.ArchivePath, "files", res.Files)
	m.dropIndexedAs(ctx, rels, "archive")
	return res, nil
}
