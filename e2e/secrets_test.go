package e2e

import (
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

func TestSecretsAPI(t *testing.T) {
	d := startDaemon(t, "")
	ctx := testCtx(t, time.Minute)
	sec, err := d.client.PutSecret(ctx, api.CreateSecretRequest{Name: "API_TOKEN", Value: testSecret, Hosts: []string{"API.example.com.", "*.example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Name != "API_TOKEN" || strings.Join(sec.Hosts, ",") != "api.example.com,*.example.org" {
		t.Errorf("created %+v", sec)
	}
	// The value never comes back, in any representation.
	for _, path := range []string{"/v1/secrets", "/v1/secrets/API_TOKEN"} {
		resp, err := http.Get("http://" + d.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(b), testSecret) || strings.Contains(string(b), "value") {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	for _, tc := range []struct {
		name string
		req  api.CreateSecretRequest
		want string
	}{
		{"bad name", api.CreateSecretRequest{Name: "1X", Value: testSecret, Hosts: []string{"a.com"}}, "environment variable name"},
		{"short value", api.CreateSecretRequest{Name: "X", Value: "abc", Hosts: []string{"a.com"}}, "8 to"},
		{"no hosts", api.CreateSecretRequest{Name: "X", Value: testSecret}, "1 to 32 host names"},
		{"bad host", api.CreateSecretRequest{Name: "X", Value: testSecret, Hosts: []string{"*"}}, `secret host "*"`},
	} {
		if _, err := d.client.PutSecret(ctx, tc.req); !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want invalid argument containing %q", tc.name, err, tc.want)
		}
	}
	if err := d.client.DeleteSecret(ctx, "API_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.client.Secret(ctx, "API_TOKEN"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
}

// TestSecretsBrokering: the sandbox holds a placeholder; the server the
// secret belongs to receives the real value over HTTP and HTTPS; any other
// server receives the placeholder; the real value is nowhere in the
// sandbox, its files, its processes or the daemon's log.
func TestSecretsBrokering(t *testing.T) {
	needBase(t)
	ti := newTestInternet(t)
	d := startDaemon(t, "", ti.daemonArgs()...)
	ctx := testCtx(t, 5*time.Minute)
	if _, err := d.client.PutSecret(ctx, api.CreateSecretRequest{Name: "API_TOKEN", Value: testSecret, Hosts: []string{secretHost}}); err != nil {
		t.Fatal(err)
	}
	pol := &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{secretHost, allowedHost}}
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := newNetSandbox(t, d, ti, rt, pol, "API_TOKEN")
			ph := sb.Env["API_TOKEN"]
			if !strings.HasPrefix(ph, "airlock-secret-") {
				t.Fatalf("API_TOKEN = %q, want a placeholder", ph)
			}
			path := "/" + rt
			auth := `-H "Authorization: Bearer $API_TOKEN" `
			runProbes(t, sb, []probe{
				// The sandbox trusts its own CA through the env the daemon set.
				{"secret host over HTTPS", "curl -sS --fail -m 5 " + auth + "https://secret.test" + path + "/https", "auth=Bearer " + ph},
				{"secret host over HTTP", "curl -sS --fail -m 5 " + auth + "http://secret.test" + path + "/http", "auth=Bearer " + ph},
				{"secret in a body", `curl -sS --fail -m 5 -d "token=$API_TOKEN" https://secret.test` + path + "/body", "body=token=" + ph},
				{"python, via SSL_CERT_FILE", `python3 -c '
import os, urllib.request
r = urllib.request.Request("https://secret.test` + path + `/python", headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]})
print(urllib.request.urlopen(r, timeout=5).read().decode())'`, "auth=Bearer " + ph},
				{"other host over HTTPS", curl(auth + "https://allowed.test" + path + "/other-https"), "auth=Bearer " + ph},
				{"other host over HTTP", curl(auth + "http://allowed.test" + path + "/other-http"), "auth=Bearer " + ph},
			})
			for _, tc := range []struct{ path, auth string }{
				{"/https", "Bearer " + testSecret},
				{"/http", "Bearer " + testSecret},
				{"/python", "Bearer " + testSecret},
				{"/other-https", "Bearer " + ph},
				{"/other-http", "Bearer " + ph},
			} {
				reqs := ti.requests(path + tc.path)
				if len(reqs) != 1 || reqs[0].auth != tc.auth {
					t.Errorf("server saw %s: %+v, want Authorization %q", tc.path, reqs, tc.auth)
				}
			}
			if out, _ := sh(t, sb, "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c airlock-secret-"); strings.TrimSpace(out) == "0" {
				t.Errorf("the placeholder is not in any process environment, so the grep below proves nothing")
			}
			// Nothing the sandbox can read holds the value.
			out, code := sh(t, sb, "env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; grep -rsl '"+testSecret+"' /etc /tmp /root /home /var /run /.airlock; true")
			if code != 0 || strings.Contains(out, testSecret) {
				t.Errorf("the real value is visible inside the sandbox:\n%s", out)
			}
			// Nor the sandbox's files on the host.
			sbDir := filepath.Join(d.dataDir, "drivers", rt, "sandboxes", sb.ID)
			// The writable layer (mounted and as its disk image), the bundle,
			// and the network state with the sandbox CA.
			if out, _ := exec.Command("grep", "-rl", "--exclude=netns", testSecret, filepath.Join(sbDir, "disk", "upper"), filepath.Join(sbDir, "disk.img"),
				filepath.Join(sbDir, "bundle"), filepath.Join(d.dataDir, "network", sb.ID)).Output(); len(out) > 0 {
				t.Errorf("the real value is in the sandbox's files on the host: %s", out)
			}
		})
	}
	if strings.Contains(d.logs(), testSecret) {
		t.Errorf("the real value is in the daemon's log")
	}
}
