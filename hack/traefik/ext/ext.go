// Package ext stands in for Traefik's dynamic configuration extension
// module, which lives in Traefik's repository beside its main module and is
// not published on its own. Traefik's open-source build leaves every
// extension empty.
package ext

// HTTP extends Traefik's dynamic HTTP configuration; empty.
type HTTP struct{}

// Router extends Traefik's HTTP router; empty.
type Router struct{}

// RouterIng extends a router built from ingress annotations; empty.
type RouterIng struct{}

// ToRouter converts r to a Router.
func (RouterIng) ToRouter() Router { return Router{} }
