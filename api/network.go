package api

import "time"

// Network modes of a sandbox.
const (
	// NetworkNone: no network interface at all (loopback only). The default.
	NetworkNone = "none"
	// NetworkAllowlist: only the CIDRs and domain names in Allow are
	// reachable; DNS answers only allowlisted names.
	NetworkAllowlist = "allowlist"
	// NetworkOpen: the internet, except loopback, link-local (cloud
	// metadata), private and CGNAT ranges, the host and other sandboxes.
	NetworkOpen = "open"
)

// NetworkPolicy is a sandbox's egress policy: the "network" field of
// CreateSandboxRequest and the body of PUT /v1/sandboxes/{id}/network.
type NetworkPolicy struct {
	Mode string `json:"mode"`
	// Allow lists what an allowlist sandbox may reach: IPv4 CIDRs or
	// addresses ("10.1.2.0/24", "203.0.113.7"), domain names
	// ("example.com") and wildcards ("*.example.com": every subdomain, not
	// the name itself). Only for mode allowlist.
	Allow []string `json:"allow,omitempty"`
}

// SandboxNetwork is a sandbox's network: its policy and, for a sandbox
// with a network interface, its address.
type SandboxNetwork struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	// Address is the sandbox's IPv4 address; empty in mode none.
	Address string `json:"address,omitempty"`
	// Gateway is the host end of the sandbox's link; it also serves DNS.
	Gateway string `json:"gateway,omitempty"`
}

// CreateSecretRequest is the body of POST /v1/secrets. A secret of the
// same name is replaced.
type CreateSecretRequest struct {
	// Name is also the environment variable a sandbox sees (with a
	// placeholder value) when it is created with secrets: [Name].
	Name  string `json:"name"`
	Value string `json:"value"`
	// Hosts the real value may be sent to: names and *.wildcards.
	Hosts []string `json:"hosts"`
}

// Secret describes a registered secret. Its value is never returned.
type Secret struct {
	Name      string    `json:"name"`
	Hosts     []string  `json:"hosts"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}
