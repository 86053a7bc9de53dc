package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A table as this kernel prints it (captured here: a listener, a peer
// still open, and a peer that sent its request and closed before it was
// looked up: FIN_WAIT2, inode 0, listed as uid 0).
const sampleTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   1: 0100007F:DDCD 00000000:0000 0A 00000000:00000001 00:00000000 00000000     0        0 7999 2 000000009c03b144 100 0 0 10 0
   2: 0100007F:DDCD 0100007F:A45A 08 00000000:00000002 00:00000000 00000000     0        0 0 1 000000002ab84874 20 4 28 10 -1
   3: 0100007F:A45A 0100007F:DDCD 05 00000000:00000000 03:0000175F 00000000     0        0 0 3 000000007f8ea2d3
   4: 0100007F:B000 0100007F:DDCD 01 00000000:00000000 00:00000000 00000000  1001        0 8123 1 000000007f8ea2d3 20 4 30 10 -1
`

const sampleTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5555 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:C350 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1002        0 5556 1 0000000000000000 20 4 30 10 -1
   2: 0000000000000000FFFF00000100007F:C351 0000000000000000FFFF00000100007F:1F90 01 00000000:00000000 00:00000000 00000000  1003        0 5557 1 0000000000000000 20 4 30 10 -1
`

func littleEndian() bool {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], 1)
	return b[0] == 1
}

func TestParseProcNetTCP(t *testing.T) {
	if !littleEndian() {
		t.Skip("the samples were captured on a little-endian host")
	}
	socks, err := parseProcNetTCP([]byte(sampleTCP))
	if err != nil {
		t.Fatal(err)
	}
	if len(socks) != 4 {
		t.Fatalf("%d sockets, want 4: %+v", len(socks), socks)
	}
	want := tcpSocket{Local: netip.MustParseAddrPort("127.0.0.1:45056"), Remote: netip.MustParseAddrPort("127.0.0.1:56781"), State: 1, UID: 1001, Inode: 8123}
	if socks[3] != want {
		t.Errorf("socket 4: %+v, want %+v", socks[3], want)
	}
	server := netip.MustParseAddrPort("127.0.0.1:56781")
	// The live peer is found with its owner.
	if s, ok := findPeer(socks, server, netip.MustParseAddrPort("127.0.0.1:45056")); !ok || s.UID != 1001 {
		t.Errorf("live peer: %+v %v", s, ok)
	}
	// The orphan (closed by its process: uid 0, inode 0) identifies no
	// one: taking its uid would admit any user as root.
	if s, ok := findPeer(socks, server, netip.MustParseAddrPort("127.0.0.1:42074")); ok {
		t.Errorf("an orphaned socket was taken as the peer: %+v", s)
	}
	// The server's own end of a connection is not the peer.
	if s, ok := findPeer(socks, netip.MustParseAddrPort("127.0.0.1:42074"), server); ok {
		t.Errorf("the server's own end was taken as the peer: %+v", s)
	}

	socks6, err := parseProcNetTCP([]byte(sampleTCP6))
	if err != nil {
		t.Fatal(err)
	}
	srv6 := netip.MustParseAddrPort("[::1]:8080")
	if s, ok := findPeer(socks6, srv6, netip.MustParseAddrPort("[::1]:50000")); !ok || s.UID != 1002 {
		t.Errorf("IPv6 peer: %+v %v", s, ok)
	}
	// A v4-mapped peer of a dual-stack listener matches its plain form.
	if s, ok := findPeer(socks6, netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("127.0.0.1:50001")); !ok || s.UID != 1003 {
		t.Errorf("v4-mapped peer: %+v %v", s, ok)
	}
}

// parseCases are malformed tables (several found by the fuzzer): each must
// be an error, never a panic and never a socket.
var parseCases = []string{
	"   1: 0100007F:DDCD 00000000:0000 0A",
	"   1: 0100007F:DDCD 00000000:0000 0A 0 0 0 x 0 1",
	"   1: 0100007F:DDCD 00000000:0000 0A 0 0 0 0 0 -1",
	"   1: 0100007F:DDCD 00000000:0000 0A 0 0 0 4294967296 0 1",
	"   1: 0100007F:DDCDD 00000000:0000 0A 0 0 0 0 0 1",
	"   1: 0100007F 00000000:0000 0A 0 0 0 0 0 1",
	"   1: 0100007:FDDCD 00000000:0000 0A 0 0 0 0 0 1",
	"   1: 0100007G:DDCD 00000000:0000 0A 0 0 0 0 0 1",
	"   1: 0100007F:DDCD 00000000:0000 A 0 0 0 0 0 1",
	"   1: 0100007F:DDCD 00000000:0000 0A0 0 0 0 0 0 1",
	"   1: +100007F:DDCD 00000000:0000 0A 0 0 0 0 0 1",
	"   1: 0100007F:+DCD 00000000:0000 0A 0 0 0 0 0 1",
	"   1: 0100007F:DDCD 00000000:0000 +A 0 0 0 0 0 1",
	"   1: 000000000000000000000000010000:1F90 00000000:0000 0A 0 0 0 0 0 1",
	"1 0100007F:DDCD 00000000:0000 0A 0 0 0 0 0 1",
	": 0100007F:DDCD 00000000:0000 0A 0 0 0 0 0 1",
	"sl local\n  sl local",
	"\n sl x",
	"   1: :DDCD 00000000:0000 0A 0 0 0 0 0 1",
	// From the fuzzer's corpus: bytes that are not hex digits, addresses
	// of other lengths, too few fields.
	"0: 00000000:0000 \xab\xab\xab\xab\xab\xab\xab\xab 0 0 0 0 0 0",
	"0: \xe40000000000000000 0 0 0 0 0 0 0 0",
	"0: 0000000000000000000000000000000000000000000000000000000000000000 0 0 0 0 0 0 0 0",
	"0: 00000000000000000000000000000000:0000 0 0 0 0 0 0 0 0",
	"0: 00000000:0000 \"\" 0 0 0 0 0 0 0",
	"0: 00000000:0000 00000000:0000 \xab\xab 0 0 0 0 0 0",
	" 0: 00000000000000000000000000000000:0000 00000000000000000000000000000000:0000 00 0 0 0 0 0 0\n   0",
}

// acceptedCases parse (from the fuzzer's corpus): the fewest fields the
// kernel prints, and a line mixing the families (no table holds one, and
// no connection can match it).
var acceptedCases = []struct {
	table string
	want  tcpSocket
}{
	{"0: 00000000:0000 00000000:0000 00 0 0 0 100000 0 0",
		tcpSocket{Local: netip.MustParseAddrPort("0.0.0.0:0"), Remote: netip.MustParseAddrPort("0.0.0.0:0"), UID: 100000}},
	{"0: 00000000:0010 00000000000000000000000000000000:0000 0A 0 0 0 7 0 9",
		tcpSocket{Local: netip.MustParseAddrPort("0.0.0.0:16"), Remote: netip.MustParseAddrPort("[::]:0"), State: 10, UID: 7, Inode: 9}},
}

func TestParseProcNetTCPMalformed(t *testing.T) {
	for _, c := range parseCases {
		if socks, err := parseProcNetTCP([]byte(c)); err == nil {
			t.Errorf("%q: parsed as %+v, want an error", c, socks)
		}
	}
	for _, c := range acceptedCases {
		socks, err := parseProcNetTCP([]byte(c.table))
		if err != nil || len(socks) != 1 || socks[0] != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.table, socks, err, c.want)
		}
	}
	// Empty tables and a header alone hold no socket.
	for _, c := range []string{"", "\n\n", "  sl  local_address rem_address\n"} {
		if socks, err := parseProcNetTCP([]byte(c)); err != nil || len(socks) != 0 {
			t.Errorf("%q: %+v %v", c, socks, err)
		}
	}
}

// formatHexAddrPort is the kernel's rendering, for the round trip.
func formatHexAddrPort(ap netip.AddrPort) string {
	var sb strings.Builder
	a := ap.Addr()
	raw := a.AsSlice()
	for w := 0; w < len(raw)/4; w++ {
		fmt.Fprintf(&sb, "%08X", binary.NativeEndian.Uint32(raw[w*4:]))
	}
	fmt.Fprintf(&sb, ":%04X", ap.Port())
	return sb.String()
}

func formatTCP(s tcpSocket) string {
	return fmt.Sprintf("   0: %s %s %02X 00000000:00000000 00:00000000 00000000 %5d        0 %d 1 0000000000000000 20 4 30 10 -1\n",
		formatHexAddrPort(s.Local), formatHexAddrPort(s.Remote), s.State, s.UID, s.Inode)
}

// FuzzParseProcNetTCP: any input parses without panicking, and whatever
// parses renders back (as the kernel would print it) to the same sockets.
func FuzzParseProcNetTCP(f *testing.F) {
	f.Add([]byte(sampleTCP))
	f.Add([]byte(sampleTCP6))
	for _, c := range parseCases {
		f.Add([]byte(c))
	}
	for _, c := range acceptedCases {
		f.Add([]byte(c.table))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		socks, err := parseProcNetTCP(b)
		if err != nil {
			return
		}
		var sb strings.Builder
		for _, s := range socks {
			sb.WriteString(formatTCP(s))
		}
		again, err := parseProcNetTCP([]byte(sb.String()))
		if err != nil {
			t.Fatalf("rendered sockets do not parse: %v\n%s", err, sb.String())
		}
		if len(again) != len(socks) {
			t.Fatalf("%d sockets became %d", len(socks), len(again))
		}
		for i := range socks {
			if socks[i] != again[i] {
				t.Fatalf("socket %d: %+v became %+v", i, socks[i], again[i])
			}
		}
	})
}

// TestPeerUIDLive: over a real loopback connection the peer is this
// process's user; once the peer has sent its request and closed (the
// kernel then lists its socket as uid 0, with no inode), it is unknown,
// not root.
func TestPeerUIDLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peer check reads /proc/net")
	}
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "tcp6" {
				addr = "[::1]:0"
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer ln.Close()
			client, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			srv, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			uid, err := peerUIDOf(srv)
			if err != nil || uid != uint32(os.Geteuid()) {
				t.Fatalf("live peer: uid %d, %v; want %d", uid, err, os.Geteuid())
			}
			// Send and close: the attack that made an orphan look like root.
			if _, err := client.Write([]byte("POST /mcp HTTP/1.1\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			client.Close()
			var last error
			ok := false
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				uid, last = peerUIDOf(srv)
				if errors.Is(last, errPeerUnknown) {
					ok = true
					break
				}
			}
			if !ok {
				t.Fatalf("after the peer closed: uid %d, %v; want errPeerUnknown", uid, last)
			}
		})
	}
}

// TestPeerGuard: the middleware's verdicts, the lookup replaced (the real
// one is exercised above and, across users, in integration/peercred_test.go).
func TestPeerGuard(t *testing.T) {
	cases := []struct {
		name     string
		uid      uint32
		err      error
		remoteOK bool
		remote   string
		want     int
	}{
		{"own user", 1000, nil, false, "127.0.0.1:5000", http.StatusOK},
		{"root", 0, nil, false, "127.0.0.1:5000", http.StatusOK},
		{"another user", 1001, nil, false, "127.0.0.1:5000", http.StatusForbidden},
		{"unknown on loopback", 0, errPeerUnknown, false, "127.0.0.1:5000", http.StatusForbidden},
		{"unknown loopback, wide listener", 0, errPeerUnknown, true, "127.0.0.1:5000", http.StatusForbidden},
		{"another host, wide listener", 0, errPeerUnknown, true, "192.0.2.7:5000", http.StatusOK},
		{"another host, loopback listener", 0, errPeerUnknown, false, "192.0.2.7:5000", http.StatusForbidden},
		{"unreadable table", 0, errors.New("permission denied"), true, "192.0.2.7:5000", http.StatusForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			refused := 0
			p := &peerPolicy{allowed: []uint32{1000, 0}, remoteOK: c.remoteOK,
				lookup:  func(net.Conn) (tcpSocket, error) { return tcpSocket{UID: c.uid}, c.err },
				refused: func(*http.Request, string, string) { refused++ }}
			h := p.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			ra, _ := net.ResolveTCPAddr("tcp", c.remote)
			r = r.WithContext(connContext(r.Context(), fakeConn{remote: ra}))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.want {
				t.Errorf("status %d, want %d", w.Code, c.want)
			}
			if (c.want == http.StatusForbidden) != (refused == 1) {
				t.Errorf("refusals recorded: %d", refused)
			}
		})
	}
	// A request with no recorded connection is refused.
	p := &peerPolicy{allowed: []uint32{0}, lookup: func(net.Conn) (tcpSocket, error) { return tcpSocket{}, nil }}
	w := httptest.NewRecorder()
	p.guard(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if w.Code != http.StatusForbidden {
		t.Errorf("no connection: %d", w.Code)
	}
}

type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (f fakeConn) RemoteAddr() net.Addr { return f.remote }
func (f fakeConn) LocalAddr() net.Addr  { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8787} }

func TestRefusalLog(t *testing.T) {
	l := &refusalLog{burst: 3}
	now := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		if ok, _ := l.admit(now); !ok {
			t.Fatalf("record %d dropped within the burst", i)
		}
	}
	for i := 0; i < 5; i++ {
		if ok, _ := l.admit(now.Add(time.Second)); ok {
			t.Fatalf("record beyond the burst admitted")
		}
	}
	if ok, dropped := l.admit(now.Add(61 * time.Second)); !ok || dropped != 5 {
		t.Errorf("next minute: %v, %d dropped; want true, 5", ok, dropped)
	}
}

// TestNoBrowser: a request carrying an Origin is served only when that
// origin is the listener's own (the address the connection came in on);
// every other origin, and every Sec-Fetch-Site but same-origin, is refused.
func TestNoBrowser(t *testing.T) {
	h := noBrowser(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	v4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8787}
	v6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8787}
	for _, c := range []struct {
		local    *net.TCPAddr
		hdr, val string
		want     int
	}{
		{v4, "", "", http.StatusOK},
		// The listener's own origin, in each spelling of its address.
		{v4, "Origin", "http://127.0.0.1:8787", http.StatusOK},
		{v4, "Origin", "http://localhost:8787", http.StatusOK},
		{v4, "Origin", "http://LOCALHOST:8787", http.StatusOK},
		{v6, "Origin", "http://[::1]:8787", http.StatusOK},
		{v6, "Origin", "http://localhost:8787", http.StatusOK},
		{v4, "Sec-Fetch-Site", "same-origin", http.StatusOK},
		// A page on another localhost port, another scheme, another
		// spelling of another address, a rebound name.
		{v4, "Origin", "http://localhost:3000", http.StatusForbidden},
		{v4, "Origin", "http://127.0.0.1:8788", http.StatusForbidden},
		{v4, "Origin", "http://127.0.0.1", http.StatusForbidden},
		{v4, "Origin", "https://127.0.0.1:8787", http.StatusForbidden},
		{v4, "Origin", "http://[::1]:8787", http.StatusForbidden},
		{v6, "Origin", "http://127.0.0.1:8787", http.StatusForbidden},
		{v4, "Origin", "http://127.0.0.2:8787", http.StatusForbidden},
		{v4, "Origin", "http://[::ffff:127.0.0.1]:8787", http.StatusForbidden},
		{v4, "Origin", "http://rebound.example:8787", http.StatusForbidden},
		{v4, "Origin", "http://user@127.0.0.1:8787", http.StatusForbidden},
		{v4, "Origin", "null", http.StatusForbidden},
		{v4, "Origin", "https://evil.example", http.StatusForbidden},
		{v4, "Sec-Fetch-Site", "same-site", http.StatusForbidden},
		{v4, "Sec-Fetch-Site", "cross-site", http.StatusForbidden},
		// No listener address in the context: no origin is its own.
		{nil, "Origin", "http://127.0.0.1:8787", http.StatusForbidden},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if c.local != nil {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(c.local)))
		}
		if c.hdr != "" {
			r.Header.Set(c.hdr, c.val)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("listener %v: %s: %q: %d, want %d", c.local, c.hdr, c.val, w.Code, c.want)
		}
	}
}

// peerUIDOf is the owner uid of the socket at the other end of c.
func peerUIDOf(c net.Conn) (uint32, error) {
	s, err := peerSocketOf(c)
	return s.UID, err
}
