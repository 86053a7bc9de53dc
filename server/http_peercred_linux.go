package server

import (
	"net/netip"
	"os"
)

// peerCheck says whether this platform can identify a loopback peer.
const peerCheck = true

// lookupPeerUID finds the owner of the socket at the other end of a TCP
// connection in this network namespace's tables (/proc/self/net is the
// server's own namespace, where a loopback peer must live).
func lookupPeerUID(local, remote netip.AddrPort) (uint32, error) {
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			if os.IsNotExist(err) {
				continue // no IPv6 in this kernel
			}
			return 0, err
		}
		socks, err := parseProcNetTCP(b)
		if err != nil {
			return 0, err
		}
		if s, ok := findPeer(socks, local, remote); ok {
			return s.UID, nil
		}
	}
	return 0, errPeerUnknown
}
