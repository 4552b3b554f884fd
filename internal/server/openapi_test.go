package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
)

// The tests in this file keep openapi.json honest: every route documented
// and nothing else, every reference resolvable, and every schema of a Go
// wire type carrying exactly that type's JSON fields.

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	return doc
}

// obj returns v[key] as a JSON object, or nil.
func obj(v any, key string) map[string]any {
	m, _ := v.(map[string]any)
	o, _ := m[key].(map[string]any)
	return o
}

var openapiMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

type openapiOp struct {
	method, path string // method upper case, as in Routes()
	op, item     map[string]any
}

func (o openapiOp) String() string { return o.method + " " + o.path }

// openapiOps lists the operations of the document, sorted by path and
// method.
func openapiOps(t *testing.T, doc map[string]any) []openapiOp {
	t.Helper()
	paths := obj(doc, "paths")
	if len(paths) == 0 {
		t.Fatal("openapi.json has no paths")
	}
	var ops []openapiOp
	for _, p := range sortedKeys(paths) {
		item, ok := paths[p].(map[string]any)
		if !ok {
			t.Errorf("paths[%q] is not an object", p)
			continue
		}
		for k, v := range item {
			if !slices.Contains(openapiMethods, k) {
				continue
			}
			op, ok := v.(map[string]any)
			if !ok {
				t.Errorf("%s %s is not an object", strings.ToUpper(k), p)
				continue
			}
			ops = append(ops, openapiOp{method: strings.ToUpper(k), path: p, op: op, item: item})
		}
	}
	slices.SortFunc(ops, func(a, b openapiOp) int { return strings.Compare(a.String(), b.String()) })
	return ops
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	documented := map[string]bool{}
	for _, o := range openapiOps(t, doc) {
		documented[o.String()] = true
	}
	routes := map[string]bool{}
	for _, rt := range (&Server{}).Routes() {
		key := rt.Method + " " + rt.Path
		if routes[key] {
			t.Errorf("route %s is registered twice", key)
		}
		routes[key] = true
	}
	for _, k := range sortedKeys(routes) {
		if !documented[k] {
			t.Errorf("route %s is not documented in openapi.json", k)
		}
	}
	for _, k := range sortedKeys(documented) {
		if !routes[k] {
			t.Errorf("openapi.json documents %s, which is not a route", k)
		}
	}
}

func TestOpenAPIHeader(t *testing.T) {
	doc := loadOpenAPI(t)
	if v := doc["openapi"]; v != "3.0.3" {
		t.Errorf("openapi = %v, want 3.0.3", v)
	}
	info := obj(doc, "info")
	if info["title"] != "Airlock" || info["version"] != "1" {
		t.Errorf("info = %v, want title Airlock and version 1", info)
	}
	servers, _ := doc["servers"].([]any)
	var url any
	if len(servers) == 1 {
		url = obj(map[string]any{"server": servers[0]}, "server")["url"]
	}
	if url != "http://127.0.0.1:7878" {
		t.Errorf("servers = %v, want [{url: http://127.0.0.1:7878}]", doc["servers"])
	}
}

func TestOpenAPIOperations(t *testing.T) {
	doc := loadOpenAPI(t)
	seen := map[string]string{}
	for _, o := range openapiOps(t, doc) {
		id, _ := o.op["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s has no operationId", o)
		case seen[id] != "":
			t.Errorf("operationId %q is used by both %s and %s", id, seen[id], o)
		default:
			seen[id] = o.String()
		}
		if s, _ := o.op["summary"].(string); s == "" {
			t.Errorf("%s has no summary", o)
		}
		responses := obj(o.op, "responses")
		if len(responses) == 0 {
			t.Errorf("%s has no responses", o)
		}
		success := false
		for code := range responses {
			if !regexp.MustCompile(`^[1-5][0-9][0-9]$`).MatchString(code) {
				t.Errorf("%s: response %q is not an HTTP status", o, code)
				continue
			}
			if code < "300" {
				success = true
				continue
			}
			// Every error is an ErrorResponse (see writeError).
			resp := resolve(doc, responses[code])
			schema := obj(obj(obj(resp, "content"), "application/json"), "schema")
			if schema["$ref"] != "#/components/schemas/ErrorResponse" {
				t.Errorf("%s: response %s is not an application/json ErrorResponse", o, code)
			}
		}
		if !success {
			t.Errorf("%s documents no successful response", o)
		}
	}
}

// resolve follows a local $ref, if v is one.
func resolve(doc map[string]any, v any) map[string]any {
	m, _ := v.(map[string]any)
	ref, ok := m["$ref"].(string)
	if !ok {
		return m
	}
	target, _ := lookupPointer(doc, ref)
	r, _ := target.(map[string]any)
	return r
}

// lookupPointer resolves a local JSON pointer reference ("#/a/b").
func lookupPointer(doc map[string]any, ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("%q is not a local reference", ref)
	}
	var cur any = doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q: %q is not inside an object", ref, tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("%q: no %q", ref, tok)
		}
	}
	return cur, nil
}

func TestOpenAPIPathParameters(t *testing.T) {
	doc := loadOpenAPI(t)
	placeholder := regexp.MustCompile(`\{([^}]+)\}`)
	for _, o := range openapiOps(t, doc) {
		var params []any
		if p, ok := o.item["parameters"].([]any); ok {
			params = append(params, p...)
		}
		if p, ok := o.op["parameters"].([]any); ok {
			params = append(params, p...)
		}
		inPath := map[string]bool{}
		seen := map[string]bool{}
		for _, raw := range params {
			p := resolve(doc, raw)
			name, _ := p["name"].(string)
			in, _ := p["in"].(string)
			if name == "" || in == "" {
				t.Errorf("%s: parameter %v has no name or in", o, raw)
				continue
			}
			if seen[in+" "+name] {
				t.Errorf("%s: %s parameter %q is declared twice", o, in, name)
			}
			seen[in+" "+name] = true
			if p["schema"] == nil {
				t.Errorf("%s: parameter %q has no schema", o, name)
			}
			if in == "path" {
				if p["required"] != true {
					t.Errorf("%s: path parameter %q must be required", o, name)
				}
				inPath[name] = true
			}
		}
		want := map[string]bool{}
		for _, m := range placeholder.FindAllStringSubmatch(o.path, -1) {
			want[m[1]] = true
			if !inPath[m[1]] {
				t.Errorf("%s: path parameter {%s} is not declared", o, m[1])
			}
		}
		for name := range inPath {
			if !want[name] {
				t.Errorf("%s: declares path parameter %q that is not in the path", o, name)
			}
		}
	}
}

// collectRefs returns every $ref value in v, keyed by the location it
// appears at.
func collectRefs(v any, at string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				out[at] = s
				continue
			}
			collectRefs(e, at+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), out)
		}
	case []any:
		for i, e := range v {
			collectRefs(e, fmt.Sprintf("%s/%d", at, i), out)
		}
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	doc := loadOpenAPI(t)
	refs := map[string]string{}
	collectRefs(doc, "#", refs)
	if len(refs) == 0 {
		t.Fatal("openapi.json has no $refs")
	}
	used := map[string]bool{}
	for _, at := range sortedKeys(refs) {
		ref := refs[at]
		kind, name, ok := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
		if !strings.HasPrefix(ref, "#/components/") || !ok || strings.Contains(name, "/") {
			t.Errorf("%s: $ref %q does not name a component", at, ref)
			continue
		}
		if obj(obj(doc, "components"), kind)[name] == nil {
			t.Errorf("%s: $ref %q does not resolve: no components/%s entry %q", at, ref, kind, name)
			continue
		}
		// Schemas may only point at schemas, and so on.
		if strings.Contains(at, "/schema") && kind != "schemas" {
			t.Errorf("%s: $ref %q in a schema must point into components/schemas", at, ref)
		}
		used[kind+"/"+name] = true
	}
	// Every component is used, so nothing in the document is dead.
	for _, kind := range sortedKeys(obj(doc, "components")) {
		for _, name := range sortedKeys(obj(obj(doc, "components"), kind)) {
			if !used[kind+"/"+name] {
				t.Errorf("components/%s/%s is never referenced", kind, name)
			}
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	s := New(nil, nil, nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: status %d, body %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if !bytes.Equal(rec.Body.Bytes(), openapiDoc) {
		t.Error("served document differs from the embedded openapi.json")
	}
	if !json.Valid(rec.Body.Bytes()) {
		t.Error("served document is not valid JSON")
	}
}

// TestOpenAPIFormatted keeps the file pretty-printed with a 2-space indent,
// so that hand edits and regenerations diff cleanly.
func TestOpenAPIFormatted(t *testing.T) {
	var compact, want bytes.Buffer
	if err := json.Compact(&compact, openapiDoc); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if !bytes.Equal(openapiDoc, want.Bytes()) {
		t.Error("openapi.json is not formatted with a 2-space indent and a final newline")
	}
}

// The Go wire types whose schemas must match them field for field. The
// schema of each is components/schemas/<type name>.
var openapiTypes = []any{
	api.CreateSandboxRequest{},
	api.Sandbox{},
	api.SandboxList{},
	api.SetTimeoutRequest{},
	api.ExecRequest{},
	api.ExecResult{},
	api.ExecEvent{},
	api.RunRequest{},
	api.RunResult{},
	api.FileInfo{},
	api.FileList{},
	api.MkdirRequest{},
	api.RenameRequest{},
	api.UploadResult{},
	api.FileEvent{},
	api.TarResult{},
	api.Template{},
	api.TemplateList{},
	api.BuildTemplateRequest{},
	api.ErrorBody{},
	api.ErrorResponse{},
	api.Info{},
	api.TemplateBuildEvent{},
	api.NetworkPolicy{},
	api.SandboxNetwork{},
	api.CreateSecretRequest{},
	api.Secret{},
	api.SecretList{},
	api.StartProcessRequest{},
	api.PTYSize{},
	api.Process{},
	api.ProcessList{},
	api.ProcessEvent{},
	api.SignalRequest{},
	api.StdinResult{},
	api.PTYMessage{},
	api.CreateContextRequest{},
	api.CodeContext{},
	api.CodeContextList{},
	api.RunCodeRequest{},
	api.CodeOutput{},
	api.CodeError{},
	api.CodeResult{},
	api.CodeEvent{},
	api.RunCodeResult{},
}

type jsonField struct {
	name      string
	omitempty bool
	typ       reflect.Type
}

// jsonFields lists the fields encoding/json writes for struct type t,
// flattening untagged embedded structs as the encoder does.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty"), typ: f.Type})
	}
	return out
}

// checkSchemaType reports whether schema s describes values of Go type t
// as encoding/json writes them.
func checkSchemaType(t reflect.Type, s map[string]any) error {
	if s == nil {
		return fmt.Errorf("no schema")
	}
	// {"allOf": [{"$ref": ...}]} is a $ref that can carry a description.
	if all, ok := s["allOf"].([]any); ok && len(all) == 1 {
		s, _ = all[0].(map[string]any)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	want := func(typ, format string) error {
		if s["type"] != typ {
			return fmt.Errorf("type is %v, want %s (Go %s)", s["type"], typ, t)
		}
		if format != "" && s["format"] != format {
			return fmt.Errorf("format is %v, want %s (Go %s)", s["format"], format, t)
		}
		return nil
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return want("string", "date-time")
	case t == reflect.TypeFor[json.RawMessage]():
		if _, typed := s["type"]; typed {
			return fmt.Errorf("has type %v, want none (any JSON value)", s["type"])
		}
		return nil
	case t.Kind() == reflect.Struct:
		if ref := "#/components/schemas/" + t.Name(); s["$ref"] != ref {
			return fmt.Errorf("is %v, want $ref %s", s, ref)
		}
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return want("string", "byte")
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		if err := want("array", ""); err != nil {
			return err
		}
		items, _ := s["items"].(map[string]any)
		if err := checkSchemaType(t.Elem(), items); err != nil {
			return fmt.Errorf("items: %w", err)
		}
		return nil
	case t.Kind() == reflect.Map:
		if t.Key().Kind() != reflect.String {
			return fmt.Errorf("Go map key %s is not a string", t.Key())
		}
		if err := want("object", ""); err != nil {
			return err
		}
		values, _ := s["additionalProperties"].(map[string]any)
		if err := checkSchemaType(t.Elem(), values); err != nil {
			return fmt.Errorf("additionalProperties: %w", err)
		}
		return nil
	case t.Kind() == reflect.String:
		return want("string", "")
	case t.Kind() == reflect.Bool:
		return want("boolean", "")
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return want("integer", "")
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return want("number", "")
	}
	return fmt.Errorf("no OpenAPI mapping for Go type %s", t)
}

func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := obj(obj(doc, "components"), "schemas")
	for _, v := range openapiTypes {
		typ := reflect.TypeOf(v)
		name := typ.Name()
		t.Run(name, func(t *testing.T) {
			schema, ok := schemas[name].(map[string]any)
			if !ok {
				t.Fatalf("components/schemas has no %s", name)
			}
			if schema["type"] != "object" {
				t.Errorf("type is %v, want object", schema["type"])
			}
			props := obj(schema, "properties")
			fields := map[string]jsonField{}
			for _, f := range jsonFields(typ) {
				if _, dup := fields[f.name]; dup {
					t.Errorf("Go type has JSON field %q twice", f.name)
				}
				fields[f.name] = f
			}
			for _, fname := range sortedKeys(fields) {
				f := fields[fname]
				p, ok := props[fname].(map[string]any)
				if !ok {
					t.Errorf("field %q (Go %s) is missing from the schema", fname, f.typ)
					continue
				}
				if err := checkSchemaType(f.typ, p); err != nil {
					t.Errorf("field %q: %v", fname, err)
				}
			}
			for _, pname := range sortedKeys(props) {
				if _, ok := fields[pname]; !ok {
					t.Errorf("schema property %q is not a JSON field of %s", pname, name)
				}
			}

			required := map[string]bool{}
			reqList, _ := schema["required"].([]any)
			for _, r := range reqList {
				rname, _ := r.(string)
				required[rname] = true
				f, ok := fields[rname]
				switch {
				case !ok:
					t.Errorf("required %q is not a field", r)
				case f.omitempty:
					t.Errorf("required %q is omitempty in Go, so it can be absent", rname)
				}
			}
			// Request bodies are decoded with DisallowUnknownFields and
			// their required fields are what the server insists on.
			// Response types are written by encoding/json, which always
			// writes fields without omitempty: those are required.
			if schema["additionalProperties"] == false {
				return
			}
			for _, fname := range sortedKeys(fields) {
				if !fields[fname].omitempty && !required[fname] {
					t.Errorf("field %q is always written (no omitempty) but not required", fname)
				}
			}
		})
	}
}

// TestOpenAPIRequestBodiesStrict checks that every JSON request body schema,
// and every schema nested in one, forbids unknown properties like
// decodeJSON does.
func TestOpenAPIRequestBodiesStrict(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := obj(obj(doc, "components"), "schemas")
	var check func(at, ref string)
	checked := map[string]bool{}
	check = func(at, ref string) {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		if checked[name] {
			return
		}
		checked[name] = true
		s, _ := schemas[name].(map[string]any)
		if s["additionalProperties"] != false {
			t.Errorf("%s: request schema %s does not set additionalProperties: false", at, name)
		}
		for _, p := range obj(s, "properties") {
			nested := map[string]string{}
			collectRefs(p, "", nested)
			for _, r := range nested {
				check(at, r)
			}
		}
	}
	for _, o := range openapiOps(t, doc) {
		schema := obj(obj(obj(obj(o.op, "requestBody"), "content"), "application/json"), "schema")
		if ref, ok := schema["$ref"].(string); ok {
			check(o.String(), ref)
		} else if schema != nil {
			t.Errorf("%s: JSON request body is not a $ref to a component schema", o)
		}
	}
}
