package main

import (
	"bytes"
	"debug/pe"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/png" // the source image and the icon images are PNG
	"os"
	"slices"
	"strings"

	"github.com/tc-hib/winres"
	"github.com/tc-hib/winres/version"
)

// Windows resource names and values Atrium's .exe carries; CheckExe checks them.
const (
	productName      = "Atrium"
	originalFilename = "atrium.exe"
	iconName         = "APP" // the group icon: Explorer shows the first one, Wails' window takes it too
)

// iconSizes are the pixel sizes of the Windows icon (Explorer, taskbar, title bar, Alt+Tab).
var iconSizes = []int{256, 64, 48, 32, 24, 16}

// loadSource reads the one source image every icon is made from.
func loadSource(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open icon: %w", err)
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("decode icon %s: %w", path, err)
	}
	if b := img.Bounds(); b.Dx() != b.Dy() || b.Dx() < 256 {
		return nil, fmt.Errorf("icon %s is %dx%d: want a square of at least 256 px", path, b.Dx(), b.Dy())
	}
	return img, nil
}

// WriteSyso writes the Windows resources of atrium.exe as a COFF object (amd64) that
// `go build` links into the .exe when it lies in the main package's folder: the icon
// (iconSizes, from iconPath), VERSIONINFO (numeric file and product versions from
// Numeric, the strings FileVersion and ProductVersion = gitVersion) and the application
// manifest (Windows 10+, asInvoker, per-monitor-v2 DPI, long paths, common controls v6).
func WriteSyso(out, iconPath, gitVersion string) error {
	num, err := Numeric(gitVersion)
	if err != nil {
		return err
	}
	img, err := loadSource(iconPath)
	if err != nil {
		return err
	}
	icon, err := winres.NewIconFromResizedImage(img, iconSizes)
	if err != nil {
		return fmt.Errorf("make icon: %w", err)
	}
	rs := &winres.ResourceSet{}
	if err := rs.SetIcon(winres.Name(iconName), icon); err != nil {
		return fmt.Errorf("set icon: %w", err)
	}
	vi := version.Info{FileVersion: num, ProductVersion: num}
	for k, v := range map[string]string{
		version.CompanyName:      "Atrium developers",
		version.FileDescription:  "Atrium — a local-first home for a team of AI agents",
		version.InternalName:     "atrium",
		version.LegalCopyright:   "Atrium developers",
		version.OriginalFilename: originalFilename,
		version.ProductName:      productName,
		version.FileVersion:      gitVersion,
		version.ProductVersion:   gitVersion,
	} {
		if err := vi.Set(version.LangDefault, k, v); err != nil {
			return fmt.Errorf("version info %s: %w", k, err)
		}
	}
	rs.SetVersionInfo(vi)
	rs.SetManifest(winres.AppManifest{
		Identity:            winres.AssemblyIdentity{Name: productName, Version: num},
		Description:         productName,
		Compatibility:       winres.Win10AndAbove,
		ExecutionLevel:      winres.AsInvoker,
		DPIAwareness:        winres.DPIPerMonitorV2,
		LongPathAware:       true,
		UseCommonControlsV6: true,
	})
	var buf bytes.Buffer
	if err := rs.WriteObject(&buf, winres.ArchAMD64); err != nil {
		return fmt.Errorf("write resources: %w", err)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// WriteICO writes a Windows .ico (iconSizes) made from the source image.
func WriteICO(out, iconPath string) error {
	img, err := loadSource(iconPath)
	if err != nil {
		return err
	}
	icon, err := winres.NewIconFromResizedImage(img, iconSizes)
	if err != nil {
		return fmt.Errorf("make icon: %w", err)
	}
	var buf bytes.Buffer
	if err := icon.SaveICO(&buf); err != nil {
		return fmt.Errorf("write icon: %w", err)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// ExeReport is what CheckExe found.
type ExeReport struct {
	Format      string   // "PE32+ amd64" or "PE32 386"
	Subsystem   string   // "WINDOWS_GUI"
	IconSizes   []int    // pixel sizes of the RT_ICON images
	FileVersion string   // VERSIONINFO's numeric file version
	Strings     []string // VERSIONINFO's FileVersion and ProductVersion strings
	Manifest    string   // identity, execution level, DPI awareness
}

func (r *ExeReport) String() string {
	s := fmt.Sprintf("%s, subsystem %s, icon %v px, VERSIONINFO %s %q", r.Format, r.Subsystem, r.IconSizes, r.FileVersion, r.Strings)
	if r.Manifest != "" {
		s += ", manifest " + r.Manifest
	}
	return s
}

// CheckExe checks statically that path is Atrium's Windows app: PE32+ for amd64, the GUI
// subsystem (no console window on double-click), the icon group with every size of
// iconSizes, VERSIONINFO with the numeric version of gitVersion and the strings
// FileVersion = ProductVersion = gitVersion, and the manifest WriteSyso writes.
func CheckExe(path, gitVersion string) (*ExeReport, error) {
	return checkPE(path, gitVersion, false)
}

// CheckInstaller checks statically that path is an installer made by build/windows.sh:
// a PE32 (NSIS stubs are 32-bit) GUI program with an icon and a VERSIONINFO whose
// ProductVersion string is gitVersion. Its contents are listed by build/package-test.sh.
func CheckInstaller(path, gitVersion string) (*ExeReport, error) {
	return checkPE(path, gitVersion, true)
}

func checkPE(path, gitVersion string, installer bool) (*ExeReport, error) {
	num, err := Numeric(gitVersion)
	if err != nil {
		return nil, err
	}
	f, err := pe.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read PE headers: %w", err)
	}
	rep := &ExeReport{}
	var subsystem uint16
	switch oh := f.OptionalHeader.(type) {
	case *pe.OptionalHeader64:
		rep.Format, subsystem = "PE32+", oh.Subsystem
	case *pe.OptionalHeader32:
		rep.Format, subsystem = "PE32", oh.Subsystem
	default:
		f.Close()
		return nil, errors.New("no optional header: not an executable")
	}
	machine := f.FileHeader.Machine
	f.Close()
	switch machine {
	case pe.IMAGE_FILE_MACHINE_AMD64:
		rep.Format += " amd64"
	case pe.IMAGE_FILE_MACHINE_I386:
		rep.Format += " 386"
	default:
		rep.Format += fmt.Sprintf(" machine %#x", machine)
	}
	want := "PE32+ amd64"
	if installer {
		want = "PE32 386"
	}
	if rep.Format != want {
		return nil, fmt.Errorf("format is %s, want %s", rep.Format, want)
	}
	switch subsystem {
	case pe.IMAGE_SUBSYSTEM_WINDOWS_GUI:
		rep.Subsystem = "WINDOWS_GUI"
	case pe.IMAGE_SUBSYSTEM_WINDOWS_CUI:
		return nil, errors.New("subsystem is WINDOWS_CUI (console): a double-click would open a console window (build with -ldflags -H=windowsgui)")
	default:
		return nil, fmt.Errorf("subsystem is %d, want WINDOWS_GUI (2)", subsystem)
	}

	exe, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer exe.Close()
	rs, err := winres.LoadFromEXE(exe)
	if err != nil {
		return nil, fmt.Errorf("read resources (icon, VERSIONINFO, manifest): %w", err)
	}
	if err := checkIcons(rs, rep, installer); err != nil {
		return nil, err
	}
	if err := checkVersionInfo(rs, rep, num, gitVersion, installer); err != nil {
		return nil, err
	}
	if !installer {
		if err := checkManifest(rs, rep, num); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// checkIcons wants a group icon and, for the app, every size of iconSizes among the icon
// images (PNG, as WriteSyso stores them).
func checkIcons(rs *winres.ResourceSet, rep *ExeReport, installer bool) error {
	groups := 0
	rs.WalkType(winres.RT_GROUP_ICON, func(winres.Identifier, uint16, []byte) bool { groups++; return true })
	if groups == 0 {
		return errors.New("no icon: no RT_GROUP_ICON resource")
	}
	var bad error
	rs.WalkType(winres.RT_ICON, func(id winres.Identifier, _ uint16, data []byte) bool {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			if installer { // NSIS' own icons are bitmaps; their presence is enough
				rep.IconSizes = append(rep.IconSizes, 0)
				return true
			}
			bad = fmt.Errorf("icon image %v: %w", id, err)
			return false
		}
		rep.IconSizes = append(rep.IconSizes, cfg.Width)
		return true
	})
	if bad != nil {
		return bad
	}
	if len(rep.IconSizes) == 0 {
		return errors.New("no icon: no RT_ICON images")
	}
	slices.Sort(rep.IconSizes)
	if !installer {
		for _, s := range iconSizes {
			if !slices.Contains(rep.IconSizes, s) {
				return fmt.Errorf("icon lacks the %d px image (has %v)", s, rep.IconSizes)
			}
		}
	}
	return nil
}

// checkVersionInfo wants VERSIONINFO #1 with the numeric version and the git version in
// its strings (the installer: ProductVersion only).
func checkVersionInfo(rs *winres.ResourceSet, rep *ExeReport, num [4]uint16, gitVersion string, installer bool) error {
	var data []byte
	rs.WalkType(winres.RT_VERSION, func(_ winres.Identifier, _ uint16, d []byte) bool { data = d; return false })
	if data == nil {
		return errors.New("no VERSIONINFO (RT_VERSION) resource")
	}
	vi, err := version.FromBytes(data)
	if err != nil {
		return fmt.Errorf("decode VERSIONINFO: %w", err)
	}
	rep.FileVersion = dotted(vi.FileVersion, 4)
	if vi.FileVersion != num || vi.ProductVersion != num {
		return fmt.Errorf("VERSIONINFO numbers are %s / %s, want %s", rep.FileVersion, dotted(vi.ProductVersion, 4), dotted(num, 4))
	}
	// The string tables are only reachable through the library's JSON form.
	js, err := json.Marshal(vi)
	if err != nil {
		return fmt.Errorf("VERSIONINFO strings: %w", err)
	}
	var parsed struct {
		Info map[string]map[string]string `json:"info"`
	}
	if err := json.Unmarshal(js, &parsed); err != nil {
		return fmt.Errorf("VERSIONINFO strings: %w", err)
	}
	if len(parsed.Info) == 0 {
		return errors.New("VERSIONINFO has no string table")
	}
	keys := []string{version.FileVersion, version.ProductVersion, version.ProductName, version.OriginalFilename}
	if installer {
		keys = []string{version.ProductVersion, version.ProductName}
	}
	for lang, table := range parsed.Info {
		for _, k := range keys {
			want := map[string]string{
				version.FileVersion: gitVersion, version.ProductVersion: gitVersion,
				version.ProductName: productName, version.OriginalFilename: originalFilename,
			}[k]
			if installer && k == version.ProductName {
				if !strings.HasPrefix(table[k], productName) {
					return fmt.Errorf("VERSIONINFO %s %s is %q, want it to start with %q", lang, k, table[k], productName)
				}
				continue
			}
			if table[k] != want {
				return fmt.Errorf("VERSIONINFO %s %s is %q, want %q", lang, k, table[k], want)
			}
		}
		rep.Strings = append(rep.Strings, table[version.ProductVersion])
	}
	return nil
}

// checkManifest wants the manifest WriteSyso writes, well-formed.
func checkManifest(rs *winres.ResourceSet, rep *ExeReport, num [4]uint16) error {
	var data []byte
	rs.WalkType(winres.RT_MANIFEST, func(_ winres.Identifier, _ uint16, d []byte) bool { data = d; return false })
	if data == nil {
		return errors.New("no manifest (RT_MANIFEST) resource")
	}
	m, err := winres.AppManifestFromXML(data)
	if err != nil {
		return fmt.Errorf("decode manifest: %w", err)
	}
	switch {
	case m.Identity.Name != productName || m.Identity.Version != num:
		return fmt.Errorf("manifest identity is %q %s, want %q %s", m.Identity.Name, dotted(m.Identity.Version, 4), productName, dotted(num, 4))
	case m.ExecutionLevel != winres.AsInvoker:
		return errors.New("manifest execution level is not asInvoker")
	case m.DPIAwareness != winres.DPIPerMonitorV2:
		return errors.New("manifest DPI awareness is not per-monitor-v2")
	case m.Compatibility != winres.Win10AndAbove:
		return errors.New("manifest does not declare Windows 10 support")
	case !m.LongPathAware || !m.UseCommonControlsV6:
		return errors.New("manifest lacks long-path awareness or common controls v6")
	}
	rep.Manifest = fmt.Sprintf("%s %s asInvoker per-monitor-v2 win10", m.Identity.Name, dotted(m.Identity.Version, 4))
	return nil
}
