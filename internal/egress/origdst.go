package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// originalDst returns where the sandbox meant to connect before the
// firewall redirected the connection to the proxy (SO_ORIGINAL_DST).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a TCP connection")
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var (
		mreq *unix.IPv6Mreq
		gerr error
	)
	// SO_ORIGINAL_DST returns a sockaddr_in; IPv6Mreq is a 20-byte buffer
	// that holds it, the usual way to read it without cgo.
	if err := rc.Control(func(fd uintptr) {
		mreq, gerr = unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if gerr != nil {
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST: %w", gerr)
	}
	raw := mreq.Multiaddr
	port := binary.BigEndian.Uint16(raw[2:4])
	ip := netip.AddrFrom4([4]byte{raw[4], raw[5], raw[6], raw[7]})
	return netip.AddrPortFrom(ip, port), nil
}
