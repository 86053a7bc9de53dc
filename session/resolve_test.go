package session

import (
	"errors"
	"testing"

	"github.com/evener-dev/evener-mcp/confine"
	"github.com/evener-dev/evener-mcp/internal/sandboxtest"
)

// TestResolve: the delegate floor and a client's request, as a table,
// with no server and no bubblewrap (fake host reports).
func TestResolve(t *testing.T) {
	usable := sandboxtest.Usable
	none := confine.HostReport{OS: "linux"} // no backend at all
	h := sandboxtest.NewHost(t)
	base := func(t *testing.T, mode confine.Mode, network confine.Network, host confine.HostReport) *confine.Policy {
		t.Helper()
		spec := h.Spec(mode)
		spec.Network = network
		return sandboxtest.Resolve(t, spec, host)
	}
	const (
		off = confine.ModeOff
		ro  = confine.ModeReadOnly
		ww  = confine.ModeWorkspaceWrite
		rs  = confine.ModeRestricted
		on  = confine.NetworkOn
		no  = confine.NetworkOff
	)
	for _, c := range []struct {
		name        string
		mode        confine.Mode
		network     confine.Network
		host        confine.HostReport
		mutates     bool
		req         Request
		wantMode    confine.Mode
		wantNet     confine.Network
		wantWrites  bool // the worktree is writable
		wantDegrade bool
		wantErr     bool
		widening    bool
	}{
		{name: "writer keeps the server's mode", mode: ww, network: on, host: usable, mutates: true, wantMode: ww, wantNet: on, wantWrites: true},
		{name: "delegate under workspace-write runs read-only", mode: ww, network: on, host: usable, wantMode: ro, wantNet: on},
		{name: "delegate under restricted keeps its reads, loses its writes", mode: rs, network: no, host: usable, wantMode: rs, wantNet: no},
		{name: "delegate under off is read-only", mode: off, network: on, host: usable, wantMode: ro, wantNet: on},
		{name: "delegate with no backend degrades and says so", mode: off, network: on, host: none, wantMode: off, wantNet: on, wantWrites: true, wantDegrade: true},
		{name: "delegate asking restricted is refused", mode: ww, network: on, host: usable, req: Request{Mode: rs}, wantErr: true, widening: true},
		{name: "delegate asking workspace-write is refused", mode: ww, network: on, host: usable, req: Request{Mode: ww}, wantErr: true, widening: true},
		{name: "delegate asking read-only gets it", mode: ww, network: on, host: usable, req: Request{Mode: ro}, wantMode: ro, wantNet: on},
		{name: "writer asking restricted gets it", mode: ww, network: on, host: usable, mutates: true, req: Request{Mode: rs}, wantMode: rs, wantNet: on, wantWrites: true},
		{name: "writer asking wider is refused", mode: ro, network: on, host: usable, mutates: true, req: Request{Mode: ww}, wantErr: true},
		{name: "network off narrows", mode: ww, network: on, host: usable, mutates: true, req: Request{Network: no}, wantMode: ww, wantNet: no, wantWrites: true},
		{name: "network on where the server has it off is refused", mode: ww, network: no, host: usable, mutates: true, req: Request{Network: on}, wantErr: true},
		{name: "restricted to read-only would widen reads", mode: rs, network: no, host: usable, mutates: true, req: Request{Mode: ro}, wantErr: true},
		{name: "an explicit request is not degraded", mode: off, network: on, host: none, mutates: true, req: Request{Mode: ro}, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pol, degraded, err := Resolve(base(t, c.mode, c.network, c.host), c.mutates, c.req)
			if c.wantErr {
				if err == nil {
					t.Fatalf("want an error, got mode %s", pol.Mode())
				}
				if c.widening != errors.Is(err, ErrWidening) {
					t.Errorf("ErrWidening %v, want %v: %v", errors.Is(err, ErrWidening), c.widening, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pol.Mode() != c.wantMode || pol.Network() != c.wantNet {
				t.Errorf("mode %s network %s, want %s %s", pol.Mode(), pol.Network(), c.wantMode, c.wantNet)
			}
			writes := false
			for _, r := range pol.WriteRoots() {
				if confine.Within(h.Work, r) {
					writes = true
				}
			}
			if c.mode != off || c.wantDegrade {
				if writes != c.wantWrites && !(c.wantDegrade && pol.Mode() == off) {
					t.Errorf("worktree writable %v, want %v (roots %v)", writes, c.wantWrites, pol.WriteRoots())
				}
			}
			if (degraded != "") != c.wantDegrade {
				t.Errorf("degraded %q, want %v", degraded, c.wantDegrade)
			}
			if c.wantDegrade && FilesPolicy(pol, degraded).Mode() != ro {
				t.Error("a degraded delegate's file tools may write")
			}
		})
	}
}
