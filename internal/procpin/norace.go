//go:build !race

package procpin

func raceAcquire[T any](*stack[T]) {}
func raceRelease[T any](*stack[T]) {}
