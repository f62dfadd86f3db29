package main

import (
	"bytes"
	"debug/macho"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/jackmordaunt/icns/v2"
	"howett.net/plist"
)

// The macOS bundle's fixed names.
const (
	bundleID     = "dev.atrium.app"
	bundleExe    = "atrium"
	bundleIcon   = "atrium" // Resources/atrium.icns
	minimumMacOS = "11.0"
)

// infoPlist is the bundle's Contents/Info.plist.
type infoPlist struct {
	Name              string   `plist:"CFBundleName"`
	DisplayName       string   `plist:"CFBundleDisplayName"`
	Identifier        string   `plist:"CFBundleIdentifier"`
	Executable        string   `plist:"CFBundleExecutable"`
	IconFile          string   `plist:"CFBundleIconFile"`
	PackageType       string   `plist:"CFBundlePackageType"`
	InfoVersion       string   `plist:"CFBundleInfoDictionaryVersion"`
	ShortVersion      string   `plist:"CFBundleShortVersionString"`
	BundleVersion     string   `plist:"CFBundleVersion"`
	GitVersion        string   `plist:"AtriumVersion"`
	MinimumSystem     string   `plist:"LSMinimumSystemVersion"`
	HighResolution    bool     `plist:"NSHighResolutionCapable"`
	Category          string   `plist:"LSApplicationCategoryType"`
	DevelopmentRegion string   `plist:"CFBundleDevelopmentRegion"`
	Localizations     []string `plist:"CFBundleLocalizations"`
}

// plistFor is Atrium's Info.plist for gitVersion. Apple wants CFBundleShortVersionString
// and CFBundleVersion as up to three period-separated integers: the numbers of Numeric
// (major.minor.patch; 0.0.0 for a build without a release tag); the git version itself
// is in AtriumVersion.
func plistFor(gitVersion string) (infoPlist, error) {
	num, err := Numeric(gitVersion)
	if err != nil {
		return infoPlist{}, err
	}
	return infoPlist{
		Name: productName, DisplayName: productName, Identifier: bundleID,
		Executable: bundleExe, IconFile: bundleIcon, PackageType: "APPL", InfoVersion: "6.0",
		ShortVersion: dotted(num, 3), BundleVersion: dotted(num, 3), GitVersion: gitVersion,
		MinimumSystem: minimumMacOS, HighResolution: true,
		Category:          "public.app-category.productivity",
		DevelopmentRegion: "en", Localizations: []string{"en", "zh_CN", "zh_TW"},
	}, nil
}

// WriteApp writes the macOS bundle out (a folder ending in .app; replaced if it exists):
// Contents/Info.plist (plistFor), Contents/Resources/atrium.icns made from the source
// image, Contents/PkgInfo, and Contents/MacOS/atrium copied from binary (mode 0755).
// binary "" leaves MacOS/ empty: the layout made on Linux, where the binary cannot be built.
func WriteApp(out, iconPath, binary, gitVersion string) error {
	if filepath.Ext(out) != ".app" {
		return fmt.Errorf("bundle %s: the name must end in .app", out)
	}
	info, err := plistFor(gitVersion)
	if err != nil {
		return err
	}
	img, err := loadSource(iconPath)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return fmt.Errorf("replace bundle: %w", err)
	}
	contents := filepath.Join(out, "Contents")
	for _, d := range []string{"MacOS", "Resources"} {
		if err := os.MkdirAll(filepath.Join(contents, d), 0o755); err != nil {
			return fmt.Errorf("make bundle: %w", err)
		}
	}
	data, err := plist.MarshalIndent(info, plist.XMLFormat, "\t")
	if err != nil {
		return fmt.Errorf("encode Info.plist: %w", err)
	}
	if err := os.WriteFile(filepath.Join(contents, "Info.plist"), data, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(contents, "PkgInfo"), []byte("APPL????"), 0o644); err != nil {
		return err
	}
	var ib bytes.Buffer
	if err := icns.NewEncoder(&ib).Encode(img); err != nil {
		return fmt.Errorf("make atrium.icns: %w", err)
	}
	if err := os.WriteFile(filepath.Join(contents, "Resources", bundleIcon+".icns"), ib.Bytes(), 0o644); err != nil {
		return err
	}
	if binary == "" {
		return nil
	}
	return copyFile(filepath.Join(contents, "MacOS", bundleExe), binary, 0o755)
}

func copyFile(dst, src string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy binary: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("copy binary: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy binary: %w", err)
	}
	return out.Close()
}

// AppReport is what CheckApp found.
type AppReport struct {
	Version   string // CFBundleShortVersionString (AtriumVersion)
	IconSizes []int
	Binary    string // "universal (amd64, arm64)" or "absent"
}

func (r *AppReport) String() string {
	return fmt.Sprintf("Info.plist %s, atrium.icns %v px, binary %s", r.Version, r.IconSizes, r.Binary)
}

// CheckApp checks a bundle made by WriteApp: Info.plist parses and holds the keys macOS
// needs with the versions of gitVersion, the icon it names decodes with the sizes 32 to
// 512 px, and the executable it names is (when present, and it must be with
// binaryRequired) a universal Mach-O binary for amd64 and arm64 with mode 0755.
func CheckApp(app, gitVersion string, binaryRequired bool) (*AppReport, error) {
	want, err := plistFor(gitVersion)
	if err != nil {
		return nil, err
	}
	contents := filepath.Join(app, "Contents")
	data, err := os.ReadFile(filepath.Join(contents, "Info.plist"))
	if err != nil {
		return nil, err
	}
	var got infoPlist
	format, err := plist.Unmarshal(data, &got)
	if err != nil {
		return nil, fmt.Errorf("Info.plist: %w", err)
	}
	if format != plist.XMLFormat {
		return nil, fmt.Errorf("Info.plist is in format %d, want XML", format)
	}
	gotV := fmt.Sprintf("%+v", got)
	if wantV := fmt.Sprintf("%+v", want); gotV != wantV {
		return nil, fmt.Errorf("Info.plist is %s, want %s", gotV, wantV)
	}
	rep := &AppReport{Version: fmt.Sprintf("%s (%s)", got.ShortVersion, got.GitVersion)}
	ib, err := os.ReadFile(filepath.Join(contents, "Resources", got.IconFile+".icns"))
	if err != nil {
		return nil, fmt.Errorf("the icon Info.plist names: %w", err)
	}
	imgs, err := icns.DecodeAll(bytes.NewReader(ib))
	if err != nil {
		return nil, fmt.Errorf("decode %s.icns: %w", got.IconFile, err)
	}
	for _, img := range imgs {
		if s := img.Bounds().Dx(); !slices.Contains(rep.IconSizes, s) {
			rep.IconSizes = append(rep.IconSizes, s)
		}
	}
	slices.Sort(rep.IconSizes)
	// tc-hib's counterpart for macOS (jackmordaunt/icns, as in Wails) writes the PNG types
	// ic07-ic14 (128 to 512 px at 1x, 16 to 256 pt at 2x); 16 pt at 1x is scaled from 32.
	for _, s := range []int{32, 64, 128, 256, 512} {
		if !slices.Contains(rep.IconSizes, s) {
			return nil, fmt.Errorf("%s.icns lacks %d px (has %v)", got.IconFile, s, rep.IconSizes)
		}
	}
	exe := filepath.Join(contents, "MacOS", got.Executable)
	st, err := os.Stat(exe)
	switch {
	case errors.Is(err, os.ErrNotExist) && !binaryRequired:
		rep.Binary = "absent"
		return rep, nil
	case err != nil:
		return nil, fmt.Errorf("the executable Info.plist names: %w", err)
	case st.Mode().Perm()&0o111 == 0:
		return nil, fmt.Errorf("%s is not executable (mode %v)", exe, st.Mode())
	}
	fat, err := macho.OpenFat(exe)
	if errors.Is(err, macho.ErrNotFat) {
		return nil, fmt.Errorf("%s is not a universal binary (lipo -create the amd64 and arm64 builds)", exe)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", exe, err)
	}
	defer fat.Close()
	var arches []string
	for _, a := range fat.Arches {
		if a.Type != macho.TypeExec {
			return nil, fmt.Errorf("%s: the %v part is not an executable", exe, a.Cpu)
		}
		arches = append(arches, a.Cpu.String())
	}
	slices.Sort(arches)
	if !slices.Equal(arches, []string{"CpuAmd64", "CpuArm64"}) {
		return nil, fmt.Errorf("%s holds %v, want CpuAmd64 and CpuArm64", exe, arches)
	}
	rep.Binary = "universal (amd64, arm64)"
	return rep, nil
}
