package memory

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/atrium-dev/atrium/backend/acl"
)

// Property (issue 4, SPEC §4.3 "filtered before ranking"): for random ACLs,
// files and queries, every result of a search as a role is readable by it,
// and the results — paths, lines, scores, snippets, AlsoIn — equal those of
// the same search over an index holding only the files the role may read.
func TestSearchAsRoleEqualsReadableOnlyIndex(t *testing.T) {
	roles := []string{"code-expert", "writer", "analyst"}
	en := strings.Fields("latency budget rollback invoice sourdough kernel patch cache index review deploy meeting garden river token agent secret project path release")
	zh := strings.Fields("性能 优化 预算 回滚 数据库 索引 缓存 文章 发布 项目 路径 会议 秘密 技巧 周报")
	seeds := []int64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	// The property must bite: results are found, and for some searches the
	// unscoped index would answer differently (an unreadable file ranks, or
	// changes a score).
	var results, differs, searches int
	for _, seed := range seeds {
		rng := rand.New(rand.NewSource(seed))
		sentence := func() string {
			var w []string
			for i := 0; i < 4+rng.Intn(14); i++ {
				if rng.Intn(2) == 0 {
					w = append(w, zh[rng.Intn(len(zh))])
				} else {
					w = append(w, en[rng.Intn(len(en))])
				}
			}
			return strings.Join(w, " ")
		}
		files := map[string]string{}
		var shared []string // paragraphs stored in more than one file
		for i := 0; i < 4; i++ {
			shared = append(shared, sentence()+"。"+sentence())
		}
		dirs := []string{"memory/global/"}
		for _, r := range roles {
			dirs = append(dirs, "memory/roles/"+r+"/")
		}
		for i := 0; i < 36; i++ {
			var b strings.Builder
			fmt.Fprintf(&b, "# note %d\n\n", i)
			for p := 0; p < 1+rng.Intn(4); p++ {
				if rng.Intn(4) == 0 {
					b.WriteString(shared[rng.Intn(len(shared))])
				} else {
					b.WriteString(sentence())
				}
				b.WriteString("\n\n")
			}
			files[fmt.Sprintf("%snote-%02d.md", dirs[rng.Intn(len(dirs))], i)] = b.String()
		}
		policy := randomPolicy(t, rng, roles, files)
		full := newFixture(t, files, nil)
		full.sync(t)
		for _, role := range roles {
			who := acl.Principal{Role: role}
			readable := func(rel string) bool {
				name, ok := acl.Name(rel)
				return ok && policy.Check(who, acl.Read, name, acl.OwnerMap{}).Allowed
			}
			only := map[string]string{}
			for p, c := range files {
				if readable(p) {
					only[p] = c
				}
			}
			alone := newFixture(t, only, nil)
			alone.sync(t)
			queries := []string{sentence(), en[rng.Intn(len(en))], zh[rng.Intn(len(zh))] + " " + zh[rng.Intn(len(zh))], "secret 秘密 技巧", string([]rune(shared[0])[:min(len([]rune(shared[0])), 12)])}
			for _, q := range queries {
				for _, o := range []SearchOptions{{Query: q}, {Query: q, MinScore: -1, MaxResults: 20}, {Query: q, Mode: ModeKeyword, MinScore: -1}} {
					o.Readable = readable
					got, err := full.m.Search(context.Background(), o)
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range got.Results {
						if !readable(r.Path) {
							t.Fatalf("seed %d %s %q: unreadable %s returned", seed, role, q, r.Path)
						}
						for _, a := range r.AlsoIn {
							if !readable(a) {
								t.Fatalf("seed %d %s %q: unreadable %s in alsoIn", seed, role, q, a)
							}
						}
					}
					if got.Withheld != 0 {
						t.Errorf("seed %d %s %q: %d candidates withheld after ranking (the scope should have kept them out)", seed, role, q, got.Withheld)
					}
					o.Readable = nil
					want, err := alone.m.Search(context.Background(), o)
					if err != nil {
						t.Fatal(err)
					}
					searches++
					results += len(got.Results)
					if unscoped, err := full.m.Search(context.Background(), o); err != nil {
						t.Fatal(err)
					} else if !reflect.DeepEqual(unscoped.Results, got.Results) {
						differs++
					}
					if !reflect.DeepEqual(got.Results, want.Results) {
						t.Fatalf("seed %d %s %q (%+v):\n as role: %s\n alone:   %s", seed, role, q, o, describeResults(got.Results), describeResults(want.Results))
					}
				}
			}
		}
	}
	t.Logf("%d searches, %d results, %d differ from the unscoped search", searches, results, differs)
	if results == 0 || differs < searches/4 {
		t.Fatalf("property not exercised: %d searches, %d results, %d differ from the unscoped search", searches, results, differs)
	}
}

// randomPolicy returns an ACL with a rule per role folder (random readers,
// the role always among them), a rule for global/**, and a few file rules
// that open or close single files, checked to parse.
func randomPolicy(t *testing.T, rng *rand.Rand, roles []string, files map[string]string) *acl.Policy {
	t.Helper()
	pick := func(must string) string {
		set := []string{"admin"}
		if must != "" {
			set = append(set, must)
		}
		for _, r := range roles {
			if r != must && rng.Intn(3) == 0 {
				set = append(set, r)
			}
		}
		return "[" + strings.Join(set, ", ") + "]"
	}
	var b strings.Builder
	b.WriteString("version: \"1.0\"\nrules:\n")
	if rng.Intn(3) == 0 {
		fmt.Fprintf(&b, "  global/**: {read: %s, write: [admin]}\n", pick(""))
	} else {
		b.WriteString("  global/**: {read: [\"*\"], write: [admin]}\n")
	}
	for _, r := range roles {
		fmt.Fprintf(&b, "  roles/%s/**: {read: %s, write: [%s, admin]}\n", r, pick(r), r)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, i := range rng.Perm(len(paths))[:5] {
		name, _ := acl.Name(paths[i])
		fmt.Fprintf(&b, "  %s: {read: %s, write: [admin]}\n", name, pick(""))
	}
	p, err := acl.Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("random ACL does not parse: %v\n%s", err, b.String())
	}
	return p
}

func describeResults(rs []SearchResult) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s:%d-%d %.9f %v", r.Path, r.StartLine, r.EndLine, r.Score, r.AlsoIn))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
