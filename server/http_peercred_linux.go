package server

import (
	"net/netip"
	"os"
)

// peerCheck says whether this platform can identify a loopback peer.
const peerCheck = true

// lookupPeerSocket finds the socket at the other end of a TCP connection
// in this network namespace's tables (/proc/self/net is the server's own
// namespace, where a loopback peer must live).
func lookupPeerSocket(local, remote netip.AddrPort) (tcpSocket, error) {
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			if os.IsNotExist(err) {
				continue // no IPv6 in this kernel
			}
			return tcpSocket{}, err
		}
		socks, err := parseProcNetTCP(b)
		if err != nil {
			return tcpSocket{}, err
		}
		if s, ok := findPeer(socks, local, remote); ok {
			return s, nil
		}
	}
	return tcpSocket{}, errPeerUnknown
}
