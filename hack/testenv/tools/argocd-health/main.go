// Command argocd-health runs Argo CD resource health scripts the way Argo CD runs the ones it
// reads from argocd-cm: gopher-lua (Argo CD's Lua), only the package, base and table libraries
// open (no `useOpenLibs`), the object as the global `obj`, a one-second deadline, and the
// returned table read as {status, message} with the status one of Argo CD's six.
//
//	argocd-health test <dir>    run <dir>/health_test.yaml against <dir>/health.lua, the layout
//	                            of Argo CD's resource_customizations (inputPath, healthStatus)
//	argocd-health eval <script> read a JSON array of objects on stdin, print their health as a
//	                            JSON array of {status, message}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

// Health is Argo CD's HealthStatus as a script returns it.
type Health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

type testFile struct {
	Tests []struct {
		InputPath    string `json:"inputPath"`
		HealthStatus Health `json:"healthStatus"`
	} `json:"tests"`
}

var statuses = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health test <dir> | eval <script>")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "test":
		err = runTests(os.Args[2])
	case "eval":
		err = evalStdin(os.Args[2])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "argocd-health:", err)
		os.Exit(1)
	}
}

func runTests(dir string) error {
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		return err
	}
	var tests testFile
	if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
		return fmt.Errorf("health_test.yaml: %w", err)
	}
	if len(tests.Tests) == 0 {
		return errors.New("health_test.yaml has no tests")
	}
	failed := 0
	for _, t := range tests.Tests {
		input, err := os.ReadFile(filepath.Join(dir, t.InputPath))
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(input, &obj); err != nil {
			return fmt.Errorf("%s: %w", t.InputPath, err)
		}
		got, err := evaluate(string(script), obj)
		switch {
		case err != nil:
			failed++
			fmt.Printf("FAIL %s: %v\n", t.InputPath, err)
		case got != t.HealthStatus:
			failed++
			fmt.Printf("FAIL %s: got %s %q, want %s %q\n", t.InputPath, got.Status, got.Message,
				t.HealthStatus.Status, t.HealthStatus.Message)
		default:
			fmt.Printf("ok   %s: %s %q\n", t.InputPath, got.Status, got.Message)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d cases failed", failed, len(tests.Tests))
	}
	fmt.Printf("%d cases passed\n", len(tests.Tests))
	return nil
}

func evalStdin(scriptPath string) error {
	script, err := os.ReadFile(scriptPath)
	if err != nil {
		return err
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	var objects []map[string]any
	if err := json.Unmarshal(input, &objects); err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	out := make([]Health, 0, len(objects))
	for _, obj := range objects {
		h, err := evaluate(string(script), obj)
		if err != nil {
			return err
		}
		out = append(out, h)
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// evaluate runs script with obj as the global `obj`, in the environment Argo CD gives health
// scripts from argocd-cm.
func evaluate(script string, obj map[string]any) (Health, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{
		lua.LoadLibName: lua.OpenPackage,
		lua.BaseLibName: lua.OpenBase,
		lua.TabLibName:  lua.OpenTable,
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), Protect: true}, lua.LString(name)); err != nil {
			return Health{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return Health{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("expected a table from the script, got %s", l.Get(-1).Type())
	}
	status, ok := ret.RawGetString("status").(lua.LString)
	if !ok || !statuses[string(status)] {
		return Health{}, fmt.Errorf("invalid health status %v", ret.RawGetString("status"))
	}
	h := Health{Status: string(status)}
	switch m := ret.RawGetString("message").(type) {
	case lua.LString:
		h.Message = string(m)
	case *lua.LNilType:
	default:
		return Health{}, fmt.Errorf("message is a %s, not a string", m.Type())
	}
	return h, nil
}

// toLua converts decoded JSON as Argo CD does: objects and arrays to tables, numbers to Lua
// numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetString(k, toLua(l, item))
		}
		return t
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}
