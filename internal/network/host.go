package network

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"sync"
	"time"
)

// checkTools fails early, with the fix, when the host lacks what sandbox
// networking needs.
func checkTools() error {
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("sandbox networking needs nftables: apt-get install nftables (%w)", err)
	}
	return nil
}

// hostAddrs caches every address of every host interface briefly: the
// proxy consults it on each dial and addresses rarely change.
type hostAddrs struct {
	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
}

func (h *hostAddrs) get() []netip.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.at) < 2*time.Second && h.addrs != nil {
		return h.addrs
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return h.addrs // keep the last known set
	}
	var out []netip.Addr
	for _, a := range ifaddrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	h.addrs, h.at = out, time.Now()
	return out
}
