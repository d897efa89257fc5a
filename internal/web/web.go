package web

import _ "embed"

// AdminCSS is the style sheet shared by the admin pages.
//
//go:embed admin.css
var AdminCSS string

// HomeHead is the <head> content of the home page: title and favicon.
const HomeHead = "  <title>Envoy Admin</title>\n  <link rel=\"icon\" href=\"data:,\" />\n"
