package registry_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// initAllowed are the production packages that may have an init function, and why.
var initAllowed = map[string]string{
	"internal/extconnect": "sets GODEBUG before golang.org/x/net/http2 initialises",
	// Each calls exepages.Checkpoint, at its place in Go's init order, between the generated
	// packages' inits (TestInitDropsRunBetweenTheGroups in cmd/legate); none registers or
	// builds anything.
	"internal/exepages/afterenvoy":   "drops the executable's resident pages between package inits",
	"internal/exepages/aftersyscall": "turns fault-around off for the executable before almost every other init",
	"internal/exepages/afterwkt":     "drops the executable's resident pages between package inits",
	"internal/exepages/beforeenvoy":  "drops the executable's resident pages between package inits",
}

// tablesAllowed are package-level tables of functions that are not registries: fixed lists
// of Envoy's own behaviour that nothing registers into.
var tablesAllowed = map[string]string{
	"options.optionTable": "Envoy's command-line options",
	"tags.defaultRegexes": "Envoy's built-in tag extractors",
}

// TestNoPackageLevelRegistries fails on a package-level registry in production code (issue
// 15): an init function (where tables used to be filled), a package-level map or slice whose
// elements hold functions (a table of factories or decoders), or a package-level Registry or
// Builder. Extensions register into the one registry extensions.New builds; constant lookup
// tables of names and values are allowed.
func TestNoPackageLevelRegistries(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if rel == "test" || strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "cmd/") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkgs[filepath.ToSlash(rel)] = append(pkgs[filepath.ToSlash(rel)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("read %d packages; want the module's", len(pkgs))
	}
	for pkg, files := range pkgs {
		types := localTypes(files)
		for _, f := range files {
			for _, d := range f.Decls {
				checkDecl(t, fset, pkg, types, d)
			}
		}
	}
}

func checkDecl(t *testing.T, fset *token.FileSet, pkg string, types map[string]ast.Expr, d ast.Decl) {
	t.Helper()
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil && d.Name.Name == "init" && initAllowed[pkg] == "" {
			t.Errorf("%s: an init function; build state in constructors and register extensions in extensions.New", fset.Position(d.Pos()))
		}
	case *ast.GenDecl:
		if d.Tok != token.VAR {
			return
		}
		for _, s := range d.Specs {
			vs := s.(*ast.ValueSpec)
			typ := vs.Type
			for _, v := range vs.Values {
				if cl, ok := v.(*ast.CompositeLit); ok && typ == nil {
					typ = cl.Type
				}
			}
			if why := registryLike(typ, types); why != "" && tablesAllowed[filepath.Base(pkg)+"."+vs.Names[0].Name] == "" {
				t.Errorf("%s: package-level %s %s; pass a registry down instead (internal/registry)", fset.Position(vs.Pos()), vs.Names[0].Name, why)
			}
		}
	}
}

// localTypes maps the names of a package's type declarations to their definitions.
func localTypes(files []*ast.File) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					ts := s.(*ast.TypeSpec)
					out[ts.Name.Name] = ts.Type
				}
			}
		}
	}
	return out
}

// registryLike says why a package-level variable of type typ is a registry, or "".
func registryLike(typ ast.Expr, types map[string]ast.Expr) string {
	switch typ := typ.(type) {
	case *ast.MapType:
		if holdsFunc(typ.Value, types, 0) {
			return "is a map of functions"
		}
	case *ast.ArrayType:
		if holdsFunc(typ.Elt, types, 0) {
			return "is a list of functions"
		}
	case *ast.StarExpr:
		if sel, ok := typ.X.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Registry" || sel.Sel.Name == "Builder") {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "registry" {
				return "is an extension registry"
			}
		}
	}
	return ""
}

// holdsFunc reports whether values of type e carry functions: a func type, or a struct, map,
// slice or pointer holding one, following the package's own named types. A type of another
// package counts when its name says it is a factory or a decoder.
func holdsFunc(e ast.Expr, types map[string]ast.Expr, depth int) bool {
	if depth > 8 {
		return false
	}
	switch e := e.(type) {
	case *ast.FuncType:
		return true
	case *ast.Ident:
		def, ok := types[e.Name]
		return ok && holdsFunc(def, types, depth+1)
	case *ast.SelectorExpr:
		name := e.Sel.Name
		return strings.HasSuffix(name, "Factory") || strings.HasSuffix(name, "Decoder") || strings.HasSuffix(name, "Func")
	case *ast.StarExpr:
		return holdsFunc(e.X, types, depth+1)
	case *ast.ArrayType:
		return holdsFunc(e.Elt, types, depth+1)
	case *ast.MapType:
		return holdsFunc(e.Value, types, depth+1)
	case *ast.StructType:
		for _, f := range e.Fields.List {
			if holdsFunc(f.Type, types, depth+1) {
				return true
			}
		}
	}
	return false
}
