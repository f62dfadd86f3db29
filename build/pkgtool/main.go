// Command pkgtool makes and checks the platform resources of Atrium's packages
// (build/package.sh and build/package-test.sh run it; `go run ./build/pkgtool`):
//
//	pkgtool syso   -version V -icon PNG -out FILE.syso   Windows resources for the .exe: icon, VERSIONINFO, manifest
//	pkgtool ico    -icon PNG -out FILE.ico               a Windows icon file (for the NSIS installer)
//	pkgtool numeric -version V                           prints Numeric(V) as a.b.c.d
//	pkgtool check-exe -version V [-installer] FILE.exe   checks a built .exe statically (see CheckExe)
//	pkgtool macapp -version V -icon PNG [-binary FILE] -out Atrium.app
//	                                                     the macOS .app bundle: Info.plist, atrium.icns, the binary
//	pkgtool check-app -version V [-binary] Atrium.app    checks a bundle (see CheckApp)
//
// Every icon comes from the one source image (build/appicon.png); V is the git version
// (`git describe`), stamped into every artifact. Windows and macOS want numeric versions
// beside it: see Numeric.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pkgtool:", err)
		os.Exit(1)
	}
}

// run executes one subcommand; errors are wrapped with what failed.
func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: pkgtool syso|ico|numeric|check-exe|macapp|check-app [flags]")
	}
	fs := flag.NewFlagSet("pkgtool "+args[0], flag.ContinueOnError)
	version := fs.String("version", "", "the git version (git describe)")
	icon := fs.String("icon", "build/appicon.png", "the source image (PNG, square, at least 256 px)")
	out := fs.String("out", "", "output file or folder")
	binary := fs.String("binary", "", "macapp: the macOS binary to put in the bundle (none: the bundle without it)")
	installer := fs.Bool("installer", false, "check-exe: the file is the NSIS installer (PE32, GUI), not the app")
	withBinary := fs.Bool("binary-required", false, "check-app: the bundle must hold its executable")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	need := func(name, v string) error {
		if v == "" {
			return fmt.Errorf("%s: -%s is required", args[0], name)
		}
		return nil
	}
	switch args[0] {
	case "syso":
		if err := errors.Join(need("version", *version), need("out", *out)); err != nil {
			return err
		}
		return WriteSyso(*out, *icon, *version)
	case "ico":
		if err := need("out", *out); err != nil {
			return err
		}
		return WriteICO(*out, *icon)
	case "numeric":
		num, err := Numeric(*version)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, dotted(num, 4))
		return nil
	case "check-exe":
		if err := need("version", *version); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("check-exe: one .exe expected")
		}
		var (
			rep *ExeReport
			err error
		)
		if *installer {
			rep, err = CheckInstaller(fs.Arg(0), *version)
		} else {
			rep, err = CheckExe(fs.Arg(0), *version)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", fs.Arg(0), err)
		}
		fmt.Fprintln(stdout, rep)
		return nil
	case "macapp":
		if err := errors.Join(need("version", *version), need("out", *out)); err != nil {
			return err
		}
		return WriteApp(*out, *icon, *binary, *version)
	case "check-app":
		if err := need("version", *version); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("check-app: one .app folder expected")
		}
		rep, err := CheckApp(fs.Arg(0), *version, *withBinary)
		if err != nil {
			return fmt.Errorf("%s: %w", fs.Arg(0), err)
		}
		fmt.Fprintln(stdout, rep)
		return nil
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}
