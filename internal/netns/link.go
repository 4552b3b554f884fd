// Package netns is the host side of sandbox networking: a network
// namespace per sandbox, a veth pair between it and the host, an address
// pair from the operator's pool, and the sandbox's nftables table.
package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// PeerName is the sandbox's interface name inside its namespace.
const PeerName = "eth0"

// CreateNS creates a network namespace and pins it with a bind mount at
// path, so it outlives every process in it and the daemon itself.
func CreateNS(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o400)
	if err != nil {
		return fmt.Errorf("create netns file: %w", err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread changes network namespace and is never unlocked, so
		// the runtime discards it when this goroutine ends: no other
		// goroutine ever runs in the new namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare network namespace: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("pin network namespace: %w", err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// DeleteNS unpins a namespace created by CreateNS. The kernel frees it,
// with the sandbox end of the veth, once no process is left in it.
func DeleteNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns file: %w", err)
	}
	return nil
}

// Link describes a sandbox's veth pair.
type Link struct {
	HostIf  string       // host end, in the host's namespace
	Host    netip.Prefix // host end address, e.g. 10.89.0.1/30
	Sandbox netip.Prefix // sandbox end address, e.g. 10.89.0.2/30
}

// CreateLink creates the veth pair with its sandbox end in the namespace
// at nsPath, addresses both ends and routes the sandbox through the host.
func CreateLink(nsPath string, l Link) error {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("open netns: %w", err)
	}
	defer ns.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: l.HostIf, MTU: 1500},
		PeerName:      PeerName,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", l.HostIf, err)
	}
	host, err := netlink.LinkByName(l.HostIf)
	if err != nil {
		return fmt.Errorf("find veth %s: %w", l.HostIf, err)
	}
	// IPv4 only: nothing for the sandbox to reach the host over by IPv6
	// link-local addresses.
	disable := filepath.Join("/proc/sys/net/ipv6/conf", l.HostIf, "disable_ipv6")
	if err := os.WriteFile(disable, []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disable ipv6 on %s: %w", l.HostIf, err)
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: ipNet(l.Host)}); err != nil {
		return fmt.Errorf("address %s: %w", l.HostIf, err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("bring up %s: %w", l.HostIf, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink in netns: %w", err)
	}
	defer h.Close()
	peer, err := h.LinkByName(PeerName)
	if err != nil {
		return fmt.Errorf("find sandbox end: %w", err)
	}
	if err := h.AddrAdd(peer, &netlink.Addr{IPNet: ipNet(l.Sandbox)}); err != nil {
		return fmt.Errorf("address sandbox end: %w", err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		return fmt.Errorf("bring up sandbox end: %w", err)
	}
	if lo, err := h.LinkByName("lo"); err == nil {
		if err := h.LinkSetUp(lo); err != nil {
			return fmt.Errorf("bring up loopback: %w", err)
		}
	}
	gw := net.IP(l.Host.Addr().AsSlice())
	if err := h.RouteAdd(&netlink.Route{LinkIndex: peer.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	return nil
}

// DeleteLink removes the veth pair (both ends) if it exists.
func DeleteLink(hostIf string) error {
	l, err := netlink.LinkByName(hostIf)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("find veth %s: %w", hostIf, err)
	}
	if err := netlink.LinkDel(l); err != nil {
		return fmt.Errorf("delete veth %s: %w", hostIf, err)
	}
	return nil
}

// LinkExists reports whether the host end of a veth pair exists.
func LinkExists(hostIf string) bool {
	_, err := netlink.LinkByName(hostIf)
	return err == nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
