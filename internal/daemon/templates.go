package daemon

import (
	"context"
	"io"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/template"
)

// templateRoots adapts the template store to the sandbox manager.
type templateRoots struct{ s *template.Store }

func (t templateRoots) RootFS(name string) (string, error) {
	info, err := t.s.Get(name)
	if err != nil {
		return "", err
	}
	return info.Path, nil
}

// templateAPI adapts the template store to the HTTP API.
type templateAPI struct{ s *template.Store }

func toAPI(i template.Info) api.Template {
	return api.Template{Name: i.Name, SizeBytes: i.SizeBytes, Builder: i.Builder, BuiltAt: i.BuiltAt, Packages: i.Packages}
}

func (t templateAPI) List() ([]api.Template, error) {
	infos, err := t.s.List()
	if err != nil {
		return nil, err
	}
	out := make([]api.Template, 0, len(infos))
	for _, i := range infos {
		out = append(out, toAPI(i))
	}
	return out, nil
}

func (t templateAPI) Build(ctx context.Context, name string, force bool, progress io.Writer) (api.Template, error) {
	info, err := t.s.Build(ctx, name, template.BuildOptions{Force: force}, progress)
	if err != nil {
		return api.Template{}, err
	}
	return toAPI(info), nil
}
