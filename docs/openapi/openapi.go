// Package openapi holds kitd's OpenAPI 3.1 descriptions of its public
// surfaces, embedded so that the HTTP layer can serve them as they are:
// webapi.json (docs/api.md "Endpoints": the Web API under {base_url}, the code
// exchange and incoming webhooks on {hooks_url}) and devapi.json (docs/api.md
// "Developer API" and kitd's additions: the developer API under {base_url}/dev). The
// operator API and the app host are not described here.
//
// The JSON files are the source: edit them by hand. They cannot drift from
// the server unnoticed: the end-to-end suite validates every request and
// answer it exchanges under /api/v1 and /hooks against them
// (e2e/openapi_test.go), `make lint-openapi` lints them with Redocly, and
// this package's test loads and validates them. It never imports the
// server: it is data.
package openapi

import _ "embed"

// WebAPI is the OpenAPI 3.1 document of the Web API (webapi.json).
//
//go:embed webapi.json
var WebAPI []byte

// DevAPI is the OpenAPI 3.1 document of the developer API (devapi.json).
//
//go:embed devapi.json
var DevAPI []byte
