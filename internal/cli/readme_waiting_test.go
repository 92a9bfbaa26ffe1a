package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// The README's one-shot section tells how long "cannot help" failures take, from the
// code's own bounds: an unreachable apiserver fails after firstContact (not at once), and
// a listed object newer than the ReplicaSet is waited for during listedSettle.
func TestReadmeSaysHowLongTheOneShotWaitsBeforeFailing(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## The one-shot command")
	if !ok {
		t.Fatal(`README.md has no "## The one-shot command" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	section = strings.Join(strings.Fields(section), " ") // wrapping does not matter
	if listedSettle != time.Minute {
		t.Fatalf("listedSettle is %s: say it in the README and here", listedSettle)
	}
	for _, tc := range []struct{ claim, want string }{
		{"the apiserver's connect timeout", fmt.Sprintf("no answer for %d s (the connect timeout", int(firstContact/time.Second))},
		{"a new listed object waits its first minute", "waited for during its first minute"},
		{"the settle rule's name", "one-minute settle rule"},
	} {
		if !strings.Contains(section, tc.want) {
			t.Errorf("%s: README's one-shot section does not say %q", tc.claim, tc.want)
		}
	}
	if strings.Contains(section, "fail at once") {
		t.Error(`README's one-shot section says "fail at once": an unreachable apiserver takes the connect timeout`)
	}
}
