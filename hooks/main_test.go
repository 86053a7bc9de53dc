package hooks

import (
	"os"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
)

// TestMain lets this test binary stand in for evener-mcp's hidden helpers
// (the Landlock helper in front of a hook, the loopback holder), which the
// launcher re-executes its binary as.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if code, ok := confine.RunHidden(os.Args[1], os.Args[2:]); ok {
			os.Exit(code)
		}
	}
	os.Exit(m.Run())
}
