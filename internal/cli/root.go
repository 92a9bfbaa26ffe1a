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
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Exit codes shared by every command (docs/cli.md, "Exit codes").
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	// ExitInterrupted and ExitTerminated follow the shell's 128+signal convention:
	// SIGINT (Ctrl-C) and SIGTERM (a Job's or a pod's stop) during a command.
	ExitInterrupted = 130
	ExitTerminated  = 143
)

// Version is stamped at build time from the VERSION file (-ldflags "-X .../internal/cli.Version=1.2.3").
var Version = "dev"

// Commit is the source commit, stamped at build time (-X .../internal/cli.Commit=abc123def456);
// empty: the one the go command recorded, if any.
var Commit = ""

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

// Command makes a subcommand on the program's streams. The shipped commands are listed
// in NewRoot; a binary adds its own through Main (the development binary's dev and demo,
// internal/dev/devcli).
type Command func(*Streams) *cobra.Command

// Main runs the program with args (without the program name) and returns the exit code;
// extra are commands added to the shipped ones (NewRoot). Arguments that start with a flag and name no subcommand are the legacy one-shot Job
// form: configmap-attacher -rollout R -namespace N -configmaps a,b.
//
// ctx is the program's signal context (signal.NotifyContext in main): a command it ends
// reports "interrupted" and exits 130 (SIGINT) or 143 (SIGTERM), never "timed out".
func Main(ctx context.Context, args []string, s Streams, extra ...Command) int {
	var err error
	if isLegacy(args) {
		err = runLegacy(ctx, args, &s)
	} else {
		root := NewRoot(&s, extra...)
		root.SetArgs(args)
		if err = oneDashLongFlag(root, args); err == nil {
			err = root.ExecuteContext(ctx)
		}
		if err != nil && strings.HasPrefix(err.Error(), "unknown command") && len(args) > 0 {
			err = usageError{err}
			if sug := root.SuggestionsFor(args[0]); len(sug) > 0 {
				err = usagef("%v (did you mean %s?)", err, sug[0])
			}
		}
	}
	if err != nil && ctx.Err() != nil {
		return interrupted(ctx, s.Err)
	}
	return exitCode(err, s.Err)
}

// interrupted reports a command cut short by a signal and returns its exit code. The
// signal is known from the context's cause, which signal.NotifyContext sets to an
// error naming the signal received.
func interrupted(ctx context.Context, stderr io.Writer) int {
	code, name := ExitInterrupted, "SIGINT"
	if cause := context.Cause(ctx); cause != nil && strings.HasPrefix(cause.Error(), syscall.SIGTERM.String()) {
		code, name = ExitTerminated, "SIGTERM"
	}
	fmt.Fprintf(stderr, "error: interrupted (%s): stopped before the command finished\n", name)
	return code
}

// NewRoot returns the root command with the shipped subcommands, then extra.
func NewRoot(s *Streams, extra ...Command) *cobra.Command {
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
		// Main suggests the closest subcommand, in the words used for flags.
		DisableSuggestions:         true,
		SuggestionsMinimumDistance: 2,
	}
	root.SetVersionTemplate(versionLine() + "\n")
	// -v is verbose on every command, before the subcommand too (-v attach ...); defined
	// here, it keeps cobra from making -v the shorthand of --version.
	var verbose int
	root.Flags().CountVarP(&verbose, "verbose", "v", "log at info on stderr (-vv: debug); a subcommand's own -v")
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newAttachCommand(s), newEventSourceCommand(s), newGCCommand(s), newServeCommand(s),
		newStatusCommand(s), newVersionCommand(s))
	for _, f := range extra {
		root.AddCommand(f(s))
	}
	return root
}

// oneDashLongFlag refuses a subcommand's long flag written with one dash (-namespace, as
// in the old Job's form), which the flag parser would read as -n amespace.
func oneDashLongFlag(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		return nil
	}
	for _, a := range rest {
		if a == "--" {
			return nil
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if f := cmd.Flags().Lookup(name); f != nil {
			return usagef("%s: long flags take two dashes: --%s", a, name)
		}
	}
	return nil
}

// legacyFlags are the flags of the old Job's form (runLegacy).
var legacyFlags = []string{"rollout", "namespace", "configmaps", "kubeconfig", "timeout", "v"}

// isLegacy reports whether args are the old Job's form. After any leading -v, the first
// argument is a single-dash word flag (-rollout, or a typo of one, which the old form
// then names), or one of the old form's flags with two dashes (Go's flag package
// accepts both). -v, -h, -help, -version and every other double-dash flag go to the
// subcommands.
func isLegacy(args []string) bool {
	for len(args) > 0 && (args[0] == "-v" || args[0] == "--v") {
		args = args[1:]
	}
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
	if !strings.HasPrefix(args[0], "--") {
		return len(name) > 1 && name != "help" && name != "version"
	}
	for _, f := range legacyFlags {
		if name == f {
			return true
		}
	}
	return false
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
	if errors.As(err, &missingConfigError{}) {
		return ExitMissingConfig
	}
	return ExitFailure
}

// NewLogger returns the program's one structured logger. level is debug, info, warn or
// error (case-insensitive; empty means info); format is text or json.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	opts, err := logHandlerOptions(level, format)
	if err != nil {
		return nil, err
	}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if strings.ToLower(format) == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	log := slog.New(h)
	// client-go logs through klog (reflector watch errors, leader election); route it into
	// the same structured logger so that --log-format json stays one format.
	klog.SetSlogLogger(log.With("component", "client-go"))
	return log, nil
}

// logHandlerOptions checks the log level and format; errors are usage errors.
func logHandlerOptions(level, format string) (*slog.HandlerOptions, error) {
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return nil, usagef("log level %q: want debug, info, warn or error", level)
		}
	}
	switch strings.ToLower(format) {
	case "", "text", "json":
		return &slog.HandlerOptions{Level: lv}, nil
	}
	return nil, usagef("log format %q: want text or json", format)
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

// logLevel is the level of a one-shot command's logger: --log-level when given, else
// warn, info with -v, debug with -vv. One-shot commands print their result on stdout and
// stay quiet on stderr unless asked.
func logLevel(level string, verbose int) string {
	switch {
	case level != "":
		return level
	case verbose == 1:
		return "info"
	case verbose > 1:
		return "debug"
	}
	return "warn"
}

// addLogFlags binds a one-shot command's logging flags.
func addLogFlags(fs *pflag.FlagSet, level, format *string, verbose *int) {
	fs.CountVarP(verbose, "verbose", "v", "log at info on stderr (-vv: debug)")
	fs.StringVar(level, "log-level", *level, "log level: debug, info, warn, error (default warn; -v info)")
	fs.StringVar(format, "log-format", *format, "log format: text or json")
}
