package egress

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

// socksGreetAuth dials h's SOCKS proxy and authenticates.
func socksGreetAuth(t testing.TB, h *harness, user, pass string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", h.p.SOCKSAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{5, 1, socksMethodUserPass})
	expectBytes(t, c, []byte{5, socksMethodUserPass})
	msg := []byte{1, byte(len(user))}
	msg = append(msg, user...)
	msg = append(msg, byte(len(pass)))
	msg = append(msg, pass...)
	c.Write(msg)
	return c
}

func expectBytes(t testing.TB, c net.Conn, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %x (%v), want %x", got, err, want)
	}
}

// socksRequestBytes builds a request for cmd to host:port, using the
// address type an IP literal calls for and a domain name otherwise.
func socksRequestBytes(cmd byte, host string, port int) []byte {
	b := []byte{5, cmd, 0}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		b = append(b, socksAtypIPv4)
		b = append(b, a.AsSlice()...)
	} else if err == nil {
		b = append(b, socksAtypIPv6)
		b = append(b, a.AsSlice()...)
	} else {
		b = append(b, socksAtypDomain, byte(len(host)))
		b = append(b, host...)
	}
	return binary.BigEndian.AppendUint16(b, uint16(port))
}

// socksConnect runs a whole CONNECT and returns the connection and the
// reply code (0xff when the proxy closed without a reply).
func socksConnect(t testing.TB, h *harness, host string, port int, user, pass string) (net.Conn, byte) {
	t.Helper()
	c := socksGreetAuth(t, h, user, pass)
	expectBytes(t, c, []byte{1, 0})
	return c, socksSend(t, c, socksRequestBytes(socksCmdConnect, host, port))
}

func socksSend(t testing.TB, c net.Conn, req []byte) byte {
	t.Helper()
	c.Write(req)
	reply := make([]byte, 10)
	if _, err := io.ReadFull(c, reply); err != nil {
		return 0xff
	}
	if reply[0] != 5 || reply[3] != socksAtypIPv4 {
		t.Fatalf("malformed reply %x", reply)
	}
	c.SetDeadline(time.Time{})
	return reply[1]
}

func TestSOCKSConnectByDomain(t *testing.T) {
	echo := startEcho(t, "127.0.0.1")
	dec := newFakeDecider()
	dec.allow("allowed.test", echo, "127.0.0.1")
	h := startHarness(t, dec)

	c, code := socksConnect(t, h, "allowed.test", echo, h.p.SOCKSUser(), h.p.SOCKSPassword())
	if code != socksSucceeded {
		t.Fatalf("allowed: reply %#x", code)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "ping")
	expectBytes(t, c, []byte("ping"))

	for _, tc := range []struct {
		host string
		port int
	}{{"denied.test", echo}, {"allowed.test", echo + 1}, {"ALLOWED.TEST", echo}, {"allowed.test\x00.evil", echo}, {"169.254.169.254", 80}} {
		before := len(h.Violations())
		c, code := socksConnect(t, h, tc.host, tc.port, h.p.SOCKSUser(), h.p.SOCKSPassword())
		if code != socksNotAllowed {
			t.Errorf("%q:%d: reply %#x, want 0x02", tc.host, tc.port, code)
		}
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("%q: connection left open after a refusal", tc.host)
		}
		v := h.Violations()
		if len(v) != before+1 || v[len(v)-1].Action != actionNetworkOutbound || !strings.HasPrefix(v[len(v)-1].Raw, "socks5 CONNECT: ") {
			t.Errorf("%q: violations %v", tc.host, v)
		}
	}
	// The name reached the decider as a name (no local lookup), the
	// control byte escaped only in the report.
	calls := h.dec.Calls()
	if calls[0] != fmt.Sprintf("allowed.test:%d", echo) || calls[4] != fmt.Sprintf("allowed.test\x00.evil:%d", echo) {
		t.Errorf("decider calls %q", calls)
	}
	if got := h.Violations()[3].Target; got != fmt.Sprintf(`allowed.test\x00.evil:%d`, echo) {
		t.Errorf("violation target %q", got)
	}
	if d := h.Dials(); len(d) != 1 {
		t.Errorf("dials %v: a refused request was dialed", d)
	}
}

func TestSOCKSConnectByAddress(t *testing.T) {
	echo := startEcho(t, "127.0.0.1")
	dec := newFakeDecider()
	dec.allow("127.0.0.1", echo, "127.0.0.1")
	h := startHarness(t, dec)
	if _, code := socksConnect(t, h, "127.0.0.1", echo, h.p.SOCKSUser(), h.p.SOCKSPassword()); code != socksSucceeded {
		t.Errorf("allowed IPv4: %#x", code)
	}
	for _, host := range []string{"127.0.0.2", "::1", "::ffff:127.0.0.1"} {
		if _, code := socksConnect(t, h, host, echo, h.p.SOCKSUser(), h.p.SOCKSPassword()); code != socksNotAllowed {
			t.Errorf("%s: %#x", host, code)
		}
	}
	calls := h.dec.Calls()
	want := []string{fmt.Sprintf("127.0.0.1:%d", echo), fmt.Sprintf("127.0.0.2:%d", echo), fmt.Sprintf("[::1]:%d", echo), fmt.Sprintf("[::ffff:127.0.0.1]:%d", echo)}
	if strings.Join(calls, " ") != strings.Join(want, " ") {
		t.Errorf("decider calls %v, want %v", calls, want)
	}
}

// TestSOCKSWithXNetProxy: a stock client (golang.org/x/net/proxy, which
// sends names unresolved) works end to end.
func TestSOCKSWithXNetProxy(t *testing.T) {
	echo := startEcho(t, "127.0.0.1")
	dec := newFakeDecider()
	dec.allow("allowed.test", echo, "127.0.0.1")
	h := startHarness(t, dec)
	d, err := proxy.SOCKS5("tcp", h.p.SOCKSAddr(), &proxy.Auth{User: h.p.SOCKSUser(), Password: h.p.SOCKSPassword()}, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial("tcp", fmt.Sprintf("allowed.test:%d", echo))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "hello")
	expectBytes(t, c, []byte("hello"))
	if _, err := d.Dial("tcp", fmt.Sprintf("denied.test:%d", echo)); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("denied through x/net/proxy: %v", err)
	}
	bad, _ := proxy.SOCKS5("tcp", h.p.SOCKSAddr(), &proxy.Auth{User: h.p.SOCKSUser(), Password: "x"}, proxy.Direct)
	if _, err := bad.Dial("tcp", fmt.Sprintf("allowed.test:%d", echo)); err == nil {
		t.Error("wrong password accepted")
	}
}

func TestSOCKSRefusesUnauthenticated(t *testing.T) {
	h := startHarness(t, newFakeDecider())
	// Only "no authentication" offered.
	c, _ := net.Dial("tcp", h.p.SOCKSAddr())
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte{5, 1, 0})
	expectBytes(t, c, []byte{5, socksMethodNoAcceptable})
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("connection left open")
	}
	// Wrong user, wrong password, empty credentials.
	for _, up := range [][2]string{{h.p.SOCKSUser(), "x"}, {"x", h.p.SOCKSPassword()}, {"", ""}, {h.p.HTTPUser(), h.p.HTTPPassword()}} {
		c := socksGreetAuth(t, h, up[0], up[1])
		expectBytes(t, c, []byte{1, 1})
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("%v: connection left open", up)
		}
	}
	if calls := h.dec.Calls(); len(calls) != 0 {
		t.Errorf("unauthenticated clients reached the decider: %v", calls)
	}
}

func TestSOCKSRefusesBindAndAssociate(t *testing.T) {
	h := startHarness(t, newFakeDecider())
	for _, tc := range []struct {
		cmd  byte
		verb string
	}{{socksCmdBind, "socks5 BIND"}, {socksCmdAssociate, "socks5 UDP ASSOCIATE"}, {9, "socks5 command 9"}} {
		c := socksGreetAuth(t, h, h.p.SOCKSUser(), h.p.SOCKSPassword())
		expectBytes(t, c, []byte{1, 0})
		if code := socksSend(t, c, socksRequestBytes(tc.cmd, "8.8.8.8", 53)); code != socksCmdNotSupported {
			t.Errorf("%s: reply %#x, want 0x07", tc.verb, code)
		}
		v := h.Violations()
		if len(v) == 0 || v[len(v)-1].Target != "8.8.8.8:53" || !strings.HasPrefix(v[len(v)-1].Raw, tc.verb+": ") {
			t.Errorf("%s: violations %v", tc.verb, v)
		}
	}
	// An unknown address type.
	c := socksGreetAuth(t, h, h.p.SOCKSUser(), h.p.SOCKSPassword())
	expectBytes(t, c, []byte{1, 0})
	if code := socksSend(t, c, []byte{5, 1, 0, 9, 1, 2, 3, 4, 0, 80}); code != socksAddrNotSupported {
		t.Errorf("address type 9: %#x", code)
	}
	if calls := h.dec.Calls(); len(calls) != 0 {
		t.Errorf("decider calls %v", calls)
	}
}

func TestSOCKSRefusesSOCKS4(t *testing.T) {
	h := startHarness(t, newFakeDecider())
	for name, req := range map[string][]byte{
		"socks4":  {4, 1, 0, 80, 127, 0, 0, 1, 'u', 0},
		"socks4a": append([]byte{4, 1, 0, 80, 0, 0, 0, 1, 0}, "evil.test\x00"...),
	} {
		c, _ := net.Dial("tcp", h.p.SOCKSAddr())
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(req)
		expectBytes(t, c, []byte{0, socks4Rejected, 0, 0, 0, 0, 0, 0})
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Errorf("%s: connection left open", name)
		}
	}
	v := h.Violations()
	targets := map[string]bool{}
	for _, x := range v {
		targets[x.Target] = strings.HasPrefix(x.Raw, "socks4 CONNECT: ")
	}
	if len(v) != 2 || !targets["127.0.0.1:80"] || !targets["evil.test:80"] {
		t.Errorf("violations %v", v)
	}
	if len(h.dec.Calls()) != 0 {
		t.Errorf("decider calls %v", h.dec.Calls())
	}
}

// TestSOCKSGarbage: junk and truncated handshakes end the connection
// without a panic or a decision.
func TestSOCKSGarbage(t *testing.T) {
	h := startHarness(t, newFakeDecider())
	for _, junk := range [][]byte{
		{}, {0}, {5}, {5, 0}, {5, 255}, {6, 1, 2}, []byte("GET / HTTP/1.1\r\n\r\n"),
		{5, 1, 2, 1}, {5, 1, 2, 2, 0}, {5, 1, 2, 1, 0, 0, 5, 1},
	} {
		c, _ := net.Dial("tcp", h.p.SOCKSAddr())
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(junk)
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c)
		c.Close()
	}
	if len(h.dec.Calls()) != 0 || len(h.Dials()) != 0 {
		t.Errorf("garbage reached the decider %v or a dial %v", h.dec.Calls(), h.Dials())
	}
}

// FuzzSOCKSNegotiate: the handshake parser never panics, never returns a
// CONNECT without authenticating, and answers within the input.
func FuzzSOCKSNegotiate(f *testing.F) {
	const user, pass = "user", "pass"
	auth := append(append([]byte{5, 1, 2, 1, 4}, user...), append([]byte{4}, pass...)...)
	f.Add(append(append([]byte{}, auth...), socksRequestBytes(socksCmdConnect, "allowed.test", 443)...))
	f.Add(append(append([]byte{}, auth...), socksRequestBytes(socksCmdConnect, "::1", 22)...))
	f.Add(append(append([]byte{}, auth...), socksRequestBytes(socksCmdAssociate, "0.0.0.0", 0)...))
	f.Add([]byte{4, 1, 0, 80, 0, 0, 0, 1, 0, 'x', 0})
	f.Add([]byte{5, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		rw := struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(data), &out}
		req, err := socksNegotiate(rw, user, pass)
		if err != nil {
			return
		}
		// Exactly: username/password selected, then accepted.
		if !bytes.Equal(out.Bytes(), []byte{5, socksMethodUserPass, 1, 0}) || !bytes.Contains(data, []byte(user)) || !bytes.Contains(data, []byte(pass)) {
			t.Fatalf("a CONNECT without authenticating: input %q, replies %x", data, out.Bytes())
		}
		if req.host == "" || req.port < 0 || req.port > 65535 {
			t.Fatalf("bad request %+v", req)
		}
	})
}
