package network

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airlockdev/airlock/internal/netns"
)

// state is what a restarted daemon needs to resume a sandbox's network.
// It holds the sandbox CA's private key, so it is written 0600 in a 0700
// directory and never placed in the sandbox.
type state struct {
	ID           string            `json:"id"`
	Link         netns.Link        `json:"link"`
	Placeholders map[string]string `json:"placeholders,omitempty"` // secret name -> placeholder
	CACert       []byte            `json:"ca_cert,omitempty"`
	CAKey        []byte            `json:"ca_key,omitempty"`
}

func (s state) save(dir string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save network state: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}

func loadState(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return s, fmt.Errorf("load network state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("decode network state: %w", err)
	}
	return s, nil
}

// placeholder is a fresh per-sandbox stand-in for a secret's value: random,
// so it says nothing about the value, and plain ASCII, so it survives
// headers, URLs and JSON unescaped.
func placeholder() string {
	b := make([]byte, 20)
	rand.Read(b)
	return "airlock-secret-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}
