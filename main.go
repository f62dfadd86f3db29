// Command atrium is the Atrium desktop app and its command line (SPEC §1).
// Wails requires the window's package at the module root; everything else
// lives in backend/ (logic), app/ (the window) and frontend/ (the UI).
package main

import (
	"context"
	"os"

	"github.com/atrium-dev/atrium/app"
	"github.com/atrium-dev/atrium/backend/cli"
	"github.com/atrium-dev/atrium/frontend"
)

// version is set at build time: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Options{
		Version:     version,
		UI:          frontend.Dist(),
		A2UISchemas: frontend.A2UISchemas(),
		Desktop: func(ctx context.Context, o cli.DesktopOptions) error {
			return app.Run(ctx, app.Options{UI: o.UI, WSURL: o.WSURL, Token: o.Token, Logger: o.Logger, Focus: o.Focus,
				OnPicker: o.SetPicker, Languages: o.Languages})
		},
		Fatal: app.Fatal,
	}))
}
