//go:build !linux

package server

import (
	"errors"
	"net/netip"
)

// peerCheck says whether this platform can identify a loopback peer: not
// here (no /proc/net), so `serve` needs a bearer token.
const peerCheck = false

func lookupPeerUID(local, remote netip.AddrPort) (uint32, error) {
	return 0, errors.New("the peer of a TCP connection cannot be identified on this platform")
}
