package admin

import (
	"html"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/legateproxy/legate/internal/web"
)

// HomeEndpoints returns "/" (the HTML home page: every endpoint with its
// help, a link for plain reads and a form for the rest) and "/help".
func HomeEndpoints(reg *Registry) []Endpoint {
	return []Endpoint{
		{
			Path: "/",
			Help: "Admin home page",
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				w.Header().Set("Content-Type", "text/html; charset=UTF-8")
				writeHome(w, reg)
			},
		},
		{
			Path: "/help",
			Help: "print out list of admin commands",
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				io.WriteString(w, reg.HelpText())
			},
		},
	}
}

// writeHome renders the home page in Envoy's structure: rows sorted by path,
// "/" taking index 1, relative links, POST forms for mutations, one input
// row per parameter with ids param-<index>-<path>-<name>.
func writeHome(w io.Writer, reg *Registry) {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang='en'>\n<head>\n")
	b.WriteString(web.HomeHead)
	b.WriteString("<style>\n")
	b.WriteString(web.AdminCSS)
	b.WriteString("</style>\n</head>\n<body>\n")
	b.WriteString("\n  <table class='home-table'>\n    <thead>\n      <tr>\n        <th class='home-data'>Command</th>\n        <th class='home-data'>Description</th>\n      </tr>\n    </thead>\n    <tbody>\n")
	index := 1
	for _, e := range reg.Sorted() {
		if e.Path == "/" {
			continue
		}
		index++
		rel := strings.TrimPrefix(e.Path, "/")
		row := "<tr>"
		if index%2 == 1 {
			row = "<tr class='gray'>"
		}
		b.WriteString("\n<tr class='vert-space'><td></td><td></td></tr>\n")
		b.WriteString(row)
		b.WriteString("\n  <td class='home-data'>")
		if !e.Mutates && len(e.Params) == 0 {
			b.WriteString("<a href='" + html.EscapeString(rel) + "'>" + html.EscapeString(rel) + "</a>")
		} else {
			method, button := "get", "<button class='button-as-link'>"
			if e.Mutates {
				method, button = "post", "<button>"
			}
			b.WriteString("<form action='" + html.EscapeString(rel) + "' method='" + method + "' id='" + html.EscapeString(rel) + "' class='home-form'>\n    " + button + html.EscapeString(rel) + "</button>\n  </form>")
		}
		b.WriteString("</td>\n  <td class='home-data'>" + html.EscapeString(e.Help) + "</td>\n</tr>\n")
		for _, p := range e.Params {
			id := "param-" + strconv.Itoa(index) + "-" + strings.ReplaceAll(rel, "/", "-") + "-" + p.Name
			b.WriteString(row)
			b.WriteString("\n  <td class='option'>")
			writeWidget(&b, p, id, rel)
			b.WriteString("</td>\n  <td class='home-data'><label for='" + id + "'>" + html.EscapeString(p.Help) + "</label></td>\n</tr>\n")
		}
	}
	b.WriteString("    </tbody>\n  </table>\n</body>\n</html>\n")
	io.WriteString(w, b.String())
}

func writeWidget(b *strings.Builder, p Param, id, form string) {
	name, id, form := html.EscapeString(p.Name), html.EscapeString(id), html.EscapeString(form)
	switch p.Kind {
	case ParamBool:
		b.WriteString("<input type='checkbox' name='" + name + "' id='" + id + "' form='" + form + "'>")
	case ParamEnum:
		b.WriteString("<select name='" + name + "' id='" + id + "' form='" + form + "'>\n")
		for _, c := range p.Choices {
			c = html.EscapeString(c)
			b.WriteString("  <option value='" + c + "'>" + c + "</option>\n")
		}
		b.WriteString("</select>")
	default:
		b.WriteString("<input type='text' name='" + name + "' id='" + id + "' form='" + form + "' />")
	}
}
