package apidoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPublicAPIDocumented(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if path != root {
			if name == "internal" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	exported := map[string]int{} // package directory -> its top-level exported declarations
	for _, dir := range dirs {
		fset := token.NewFileSet()
		pkgs, err := parsePackages(fset, dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, files := range pkgs {
			if name == "main" {
				continue
			}
			checked++
			rel, _ := filepath.Rel(root, dir)
			for _, miss := range undocumented(fset, files) {
				t.Errorf("%s: %s has no doc comment", miss.pos, miss.what)
			}
			if !hasPackageDoc(files) {
				t.Errorf("%s: package %s has no package comment", rel, name)
			}
			exported[rel] += countExported(files)
		}
	}
	// Every exported name outside internal/ is a promise to custom-sink and
	// custom-binary authors: the public API stays small.
	total := 0
	for _, n := range exported {
		total += n
	}
	if total > maxPublicAPI {
		t.Errorf("%d top-level exported declarations outside internal/ (at most %d: move what users do not import under internal/): %v", total, maxPublicAPI, exported)
	}
	if checked < 10 {
		t.Fatalf("checked %d packages under %s; the walk is broken", checked, root)
	}
}

type missing struct {
	pos  token.Position
	what string
}

// maxPublicAPI bounds the top-level exported declarations (funcs, types,
// consts, vars; methods and fields not counted) of the packages outside
// internal/ directories.
const maxPublicAPI = 100

// countExported counts the top-level exported declarations of files.
func countExported(files []*ast.File) int {
	n := 0
	for _, f := range files {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					n++
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch sp := spec.(type) {
					case *ast.TypeSpec:
						if sp.Name.IsExported() {
							n++
						}
					case *ast.ValueSpec:
						for _, id := range sp.Names {
							if id.IsExported() {
								n++
							}
						}
					}
				}
			}
		}
	}
	return n
}

// parsePackages parses the non-test Go files of dir, by package name.
func parsePackages(fset *token.FileSet, dir string) (map[string][]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	pkgs := map[string][]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
	}
	return pkgs, nil
}

func hasPackageDoc(files []*ast.File) bool {
	for _, f := range files {
		if f.Doc != nil {
			return true
		}
	}
	return false
}

// undocumented lists the exported identifiers of p without a doc comment.
// A field or constant documented by a comment on its own line counts, and
// so does a group (const ( ... ), var ( ... )) with a doc comment.
func undocumented(fset *token.FileSet, files []*ast.File) []missing {
	var out []missing
	add := func(n ast.Node, what string) { out = append(out, missing{fset.Position(n.Pos()), what}) }
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil || !exportedReceiver(d) {
					continue
				}
				add(d, "func "+d.Name.Name)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if s.Doc == nil && d.Doc == nil {
							add(s, "type "+s.Name.Name)
						}
						switch tt := s.Type.(type) {
						case *ast.StructType:
							out = append(out, fields(fset, s.Name.Name, tt.Fields)...)
						case *ast.InterfaceType:
							out = append(out, fields(fset, s.Name.Name, tt.Methods)...)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
								add(n, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return out
}

func fields(fset *token.FileSet, typ string, list *ast.FieldList) []missing {
	var out []missing
	for _, f := range list.List {
		for _, n := range f.Names {
			if n.IsExported() && f.Doc == nil && f.Comment == nil {
				out = append(out, missing{fset.Position(n.Pos()), typ + "." + n.Name})
			}
		}
	}
	return out
}

// exportedReceiver reports whether d is a function or a method of an
// exported type (methods of unexported types are not part of the API).
func exportedReceiver(d *ast.FuncDecl) bool {
	if d.Recv == nil {
		return true
	}
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	id, ok := t.(*ast.Ident)
	return !ok || id.IsExported()
}
