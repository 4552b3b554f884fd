// Package server is Airlock's HTTP API (/v1): routing, request decoding,
// streaming responses and the single mapping from errors to HTTP statuses.
package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
	"github.com/airlockdev/airlock/internal/sandbox"
)

// Sandboxes is the part of the sandbox manager the API serves.
type Sandboxes interface {
	Create(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error)
	Get(ctx context.Context, id string) (api.Sandbox, error)
	List(ctx context.Context, labels map[string]string) []api.Sandbox
	Delete(ctx context.Context, id string) error
	SetTimeout(ctx context.Context, id string, seconds int64) (api.Sandbox, error)
	Exec(ctx context.Context, id string, req api.ExecRequest, eio sandbox.ExecIO) (agentproto.ExitStatus, error)
	OutputLimit(req api.ExecRequest) (int64, error)
	StreamOutputLimit(req api.ExecRequest) (int64, error)
	Run(ctx context.Context, req api.RunRequest, eio sandbox.ExecIO) (string, agentproto.ExitStatus, error)
	Agent(ctx context.Context, id string) (*agentproto.Client, error)
	StartProcess(ctx context.Context, id string, req api.StartProcessRequest) (agentproto.ProcInfo, error)
	SetNetworkPolicy(ctx context.Context, id string, p api.NetworkPolicy) (api.Sandbox, error)
	CreateContext(ctx context.Context, id string, req api.CreateContextRequest) (api.CodeContext, error)
	ListContexts(ctx context.Context, id string) ([]api.CodeContext, error)
	RestartContext(ctx context.Context, id, contextID string) (api.CodeContext, error)
	DeleteContext(ctx context.Context, id, contextID string) error
	RunCode(ctx context.Context, id string, req api.RunCodeRequest, cio sandbox.CodeIO) (agentproto.CodeEnd, error)
	RunCodeOnce(ctx context.Context, sreq api.CreateSandboxRequest, req api.RunCodeRequest, cio sandbox.CodeIO) (string, agentproto.CodeEnd, error)
	CodeOutputLimit(req api.RunCodeRequest) (int64, error)
	Runtimes() []string
	Config() sandbox.Config
}

// Templates is the part of the template store the API serves.
type Templates interface {
	List() ([]api.Template, error)
	Build(ctx context.Context, name string, force bool, progress io.Writer) (api.Template, error)
}

// Version is reported by /v1/info.
var Version = "dev"

//go:embed openapi.json
var openapiDoc []byte

// Server is the HTTP API.
type Server struct {
	sandboxes Sandboxes
	templates Templates
	secrets   Secrets // nil: secrets brokering disabled
	log       *slog.Logger
	mux       *http.ServeMux
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Route is one registered API route.
type Route struct {
	Method, Path string
	handler      handlerFunc
}

// New builds the API server.
func New(sb Sandboxes, tpl Templates, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{sandboxes: sb, templates: tpl, log: log, mux: http.NewServeMux()}
	for _, rt := range s.Routes() {
		h := rt.handler
		s.mux.HandleFunc(rt.Method+" "+rt.Path, func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				s.writeError(w, r, err)
			}
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, fmt.Errorf("%w: no route for %s %s", errdefs.ErrNotFound, r.Method, r.URL.Path))
	})
	return s
}

// Routes lists every API route; the OpenAPI document is tested against it.
func (s *Server) Routes() []Route {
	return []Route{
		{"GET", "/healthz", s.health},
		{"GET", "/v1/info", s.info},
		{"GET", "/v1/openapi.json", s.openapi},
		{"POST", "/v1/sandboxes", s.createSandbox},
		{"GET", "/v1/sandboxes", s.listSandboxes},
		{"GET", "/v1/sandboxes/{id}", s.getSandbox},
		{"DELETE", "/v1/sandboxes/{id}", s.deleteSandbox},
		{"POST", "/v1/sandboxes/{id}/timeout", s.setTimeout},
		{"POST", "/v1/sandboxes/{id}/exec", s.exec},
		{"GET", "/v1/sandboxes/{id}/files", s.download},
		{"PUT", "/v1/sandboxes/{id}/files", s.upload},
		{"DELETE", "/v1/sandboxes/{id}/files", s.removeFile},
		{"GET", "/v1/sandboxes/{id}/files/stat", s.statFile},
		{"GET", "/v1/sandboxes/{id}/files/list", s.listFiles},
		{"POST", "/v1/sandboxes/{id}/files/mkdir", s.mkdir},
		{"POST", "/v1/sandboxes/{id}/files/rename", s.rename},
		{"GET", "/v1/sandboxes/{id}/files/watch", s.watchFiles},
		{"GET", "/v1/sandboxes/{id}/files/tar", s.downloadTar},
		{"PUT", "/v1/sandboxes/{id}/files/tar", s.uploadTar},
		{"POST", "/v1/sandboxes/{id}/processes", s.startProcess},
		{"GET", "/v1/sandboxes/{id}/processes", s.listProcesses},
		{"GET", "/v1/sandboxes/{id}/processes/{sel}/output", s.processOutput},
		{"POST", "/v1/sandboxes/{id}/processes/{sel}/stdin", s.processStdin},
		{"POST", "/v1/sandboxes/{id}/processes/{sel}/stdin/close", s.closeProcessStdin},
		{"POST", "/v1/sandboxes/{id}/processes/{sel}/signal", s.signalProcess},
		{"DELETE", "/v1/sandboxes/{id}/processes/{sel}", s.killProcess},
		{"GET", "/v1/sandboxes/{id}/pty", s.pty},
		{"PUT", "/v1/sandboxes/{id}/network", s.setNetwork},
		{"POST", "/v1/secrets", s.putSecret},
		{"GET", "/v1/secrets", s.listSecrets},
		{"GET", "/v1/secrets/{name}", s.getSecret},
		{"DELETE", "/v1/secrets/{name}", s.deleteSecret},
		{"POST", "/v1/sandboxes/{id}/contexts", s.createContext},
		{"GET", "/v1/sandboxes/{id}/contexts", s.listContexts},
		{"POST", "/v1/sandboxes/{id}/contexts/{ctx}/restart", s.restartContext},
		{"DELETE", "/v1/sandboxes/{id}/contexts/{ctx}", s.deleteContext},
		{"POST", "/v1/sandboxes/{id}/code", s.runCode},
		{"POST", "/v1/run", s.run},
		{"GET", "/v1/templates", s.listTemplates},
		{"POST", "/v1/templates/{name}/build", s.buildTemplate},
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) error {
	info := api.Info{Version: Version, Runtimes: s.sandboxes.Runtimes(), DefaultRuntime: s.sandboxes.Config().DefaultRuntime}
	tpls, err := s.templates.List()
	if err != nil {
		return err
	}
	for _, t := range tpls {
		info.Templates = append(info.Templates, t.Name)
	}
	return writeJSON(w, http.StatusOK, info)
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapiDoc)
	return err
}

// Body size limits for JSON requests. Exec allows room for stdin.
const (
	maxJSONBody = 1 << 20
	maxExecBody = 32 << 20
)

func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: request body is empty, expected JSON", errdefs.ErrInvalidArgument)
		}
		return fmt.Errorf("%w: invalid JSON body: %w", errdefs.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after JSON body", errdefs.ErrInvalidArgument)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}
