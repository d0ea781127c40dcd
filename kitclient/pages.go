package kitclient

import (
	"context"
	"iter"
)

// walk yields every item of a list, page after page, until a page's
// nextCursor is null. An error is yielded once, and ends the walk.
func walk[T any](ctx context.Context, limit int, page func(context.Context, PageOptions) ([]T, *string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		opts := PageOptions{Limit: limit}
		for {
			items, next, err := page(ctx, opts)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == nil || *next == "" {
				return
			}
			opts.Cursor = *next
		}
	}
}
