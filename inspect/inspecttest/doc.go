// Package inspecttest checks an inspect.Inspector over any duework.Index and
// maintenance.StateStore: every view as HTML and as JSON, and every action, through an
// httptest.Server, with one subtest per rule. The inspect package runs it over the
// in-memory Index and the reference Model; an adapter module runs it over its own stores,
// so the pages read the same on every backend:
//
//	func TestInspector(t *testing.T) {
//		inspecttest.Run(t, func(t *testing.T) inspecttest.Stores {
//			pool := pgtest.Pool(t)
//			return inspecttest.Stores{Index: postgres.NewIndex(pool), StateStore: postgres.NewStateStore(pool)}
//		})
//	}
//
// Each rule gets fresh, empty stores. The suite decodes every JSON answer with unknown
// fields refused, so a field renamed or added without its documentation fails it.
package inspecttest
