package envtest

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every test of the package names its lane in its first statement (serial,
// parallel or hosted): a test that named none would run in both lanes of
// make envtest, and one hidden further down could start its timeouts before
// it waits for its turn.
func TestEveryTestHasALane(t *testing.T) {
	parallel(t)
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	fset := gotoken.NewFileSet()
	tests := 0
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			tests++
			assert.Contains(t, []string{"serial", "parallel", "hosted"}, firstCall(fn.Body),
				"%s (%s) must begin with serial(t), parallel(t) or hosted(t)", fn.Name.Name, fset.Position(fn.Pos()))
		}
	}
	assert.Greater(t, tests, 40, "the package's tests were found")
}

// firstCall is the name of the function that the body's first statement
// calls, or "" if that statement is not a call of a plain function.
func firstCall(body *ast.BlockStmt) string {
	if body == nil || len(body.List) == 0 {
		return ""
	}
	stmt, ok := body.List[0].(*ast.ExprStmt)
	if !ok {
		return ""
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok {
		return ""
	}
	if id, ok := call.Fun.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
