// Package regfishapi stands in for the regfish DNS API client lego's regfish
// DNS provider calls. The module proxy refuses the client release lego
// v5.4.1 names (v0.2.0) and serves only v0.1.1, which lacks the context-aware
// calls below; rather than reimplement a client for a service nothing here
// can test, they fail, so that an ACME resolver configured with the regfish
// provider says so instead of acting. The end-to-end tests never use ACME.
package regfishapi

import (
	"context"
	"errors"
	"net/http"
)

// ErrUnavailable is what every API call returns.
var ErrUnavailable = errors.New("the regfish DNS API client is not part of this Traefik build")

// Client holds the API settings lego sets.
type Client struct {
	BaseURL string
	APIKey  string
	Client  *http.Client
}

// NewClient returns a client for the API key.
func NewClient(apiKey string) *Client {
	return &Client{BaseURL: "https://api.regfish.de", APIKey: apiKey, Client: &http.Client{}}
}

// Record is a DNS resource record.
type Record struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
	Data string `json:"data"`
	TTL  int    `json:"ttl,omitempty"`
}

// AddRecord fails with ErrUnavailable.
func (c *Client) AddRecord(context.Context, Record) (Record, error) { return Record{}, ErrUnavailable }

// DeleteRecordByRRID fails with ErrUnavailable.
func (c *Client) DeleteRecordByRRID(context.Context, int) error { return ErrUnavailable }
