// Command kapp is carvel.dev/kapp v0.64.2's own main (cmd/kapp/kapp.go),
// built through this wrapper module because the module proxy refuses a
// plain `go install carvel.dev/kapp/cmd/kapp@v0.64.2`. `make bench-peers`
// builds it; `make bench` measures it against the ceremony.
package main

import (
	"os"

	"carvel.dev/kapp/pkg/kapp/cmd"
	cmdapp "carvel.dev/kapp/pkg/kapp/cmd/app"
	"github.com/cppforlife/cobrautil"
	uierrs "github.com/cppforlife/go-cli-ui/errors"
	"github.com/cppforlife/go-cli-ui/ui"
)

func main() {
	if err := run(); err != nil {
		if typed, ok := err.(cmdapp.ExitStatus); ok {
			os.Exit(typed.ExitStatus())
		}
		os.Exit(1)
	}
}

func run() error {
	confUI := ui.NewConfUI(ui.NewNoopLogger())
	defer confUI.Flush()
	command := cmd.NewDefaultKappCmd(confUI)
	if err := command.Execute(); err != nil {
		confUI.ErrorLinef("kapp: Error: %v", uierrs.NewMultiLineError(err))
		return err
	}
	if !cobrautil.IsCobraManagedCommand(os.Args) {
		confUI.PrintLinef("Succeeded")
	}
	return nil
}
