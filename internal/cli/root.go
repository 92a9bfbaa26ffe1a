// Package cli implements the configmap-attacher commands. Each command has one options
// struct holding its flags, defaults and validation; main only calls Main.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Version is stamped at build time (-ldflags "-X .../internal/cli.Version=v1.2.3").
var Version = "dev"

// usageError marks an error as a usage error (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// Streams are the command's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// registered commands; each command file adds its constructor in init().
var commands []func(*Streams) *cobra.Command

func register(f func(*Streams) *cobra.Command) { commands = append(commands, f) }

// Register adds a command from outside the package (the development binary's dev and
// demo); call it from an init function.
func Register(f func(*Streams) *cobra.Command) { register(f) }

// Main runs the program with args (without the program name) and returns the exit code.
// Arguments that start with a flag and name no subcommand are the legacy one-shot Job
// form: configmap-attacher -rollout R -namespace N -configmaps a,b.
func Main(ctx context.Context, args []string, s Streams) int {
	if isLegacy(args) {
		return exitCode(runLegacy(ctx, args, &s), s.Err)
	}
	root := NewRoot(&s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return exitCode(err, s.Err)
}

// NewRoot returns the root command with every subcommand.
func NewRoot(s *Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "configmap-attacher",
		Short: "Make ConfigMap and Secret revisions owned by the ReplicaSets that use them",
		Long: `configmap-attacher adds ReplicaSet ownerReferences to the config revisions
(ConfigMaps and Secrets labelled configmap-attacher.io/revision=true) that each
ReplicaSet uses, so Kubernetes' garbage collector deletes a revision exactly when
no ReplicaSet needs it any more.

The legacy one-shot Job form still works:
  configmap-attacher -rollout R -namespace N -configmaps a,b`,
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, f := range commands {
		root.AddCommand(f(s))
	}
	return root
}

func isLegacy(args []string) bool {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return false
	}
	switch args[0] {
	case "-h", "--help", "-help", "--version", "-version":
		return false
	}
	return true
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "error: "+core.OneLine(err.Error()))
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		return ExitUsage
	}
	return ExitFailure
}

// NewLogger returns the program's one structured logger. level is debug, info, warn or
// error (case-insensitive; empty means info); format is text or json.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return nil, usagef("log level %q: want debug, info, warn or error", level)
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, usagef("log format %q: want text or json", format)
	}
	log := slog.New(h)
	// client-go logs through klog (reflector watch errors, leader election); route it into
	// the same structured logger so that --log-format json stays one format.
	klog.SetSlogLogger(log.With("component", "client-go"))
	return log, nil
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
