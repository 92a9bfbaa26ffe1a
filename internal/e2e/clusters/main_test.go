package clusters_test

import (
	"os"
	"testing"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// Two real control planes, a and b, running at once for the package's tests.
var cpA, cpB *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMainTwo(m, &cpA, &cpB)) }

// planes returns the two control planes (nil with -short).
func planes() (a, b *controlplane.ControlPlane) { return cpA, cpB }
