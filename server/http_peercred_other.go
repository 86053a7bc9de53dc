//go:build !linux

package server

import (
	"errors"
	"net/netip"
)

// peerCheck says whether this platform can identify a loopback peer: not
// here (no /proc/net), so `serve` needs a bearer token.
const peerCheck = false

func lookupPeerSocket(local, remote netip.AddrPort) (tcpSocket, error) {
	return tcpSocket{}, errors.New("the peer of a TCP connection cannot be identified on this platform")
}

// newPeerOrigin: no process table to read here (and no peer check at all:
// `serve` needs a bearer token), so no origin check.
func newPeerOrigin() func(tcpSocket) (string, error) { return nil }
