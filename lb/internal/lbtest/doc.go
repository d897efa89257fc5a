// Package lbtest holds test helpers shared by the balancer packages: host builders, a seeded
// random source and a chi-square check. Test-only; not safe for concurrent use unless stated.
package lbtest
