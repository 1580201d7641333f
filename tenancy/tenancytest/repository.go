package tenancytest

var repositoryRules = []rule[*repoSubject]{
	{"PutGet", "Get returns the value Put stored", putGet},
	{"PutReplaces", "Put of an id the tenant holds replaces its value", replaces[*repoSubject]},
	{"GetAbsent", "Get of an id the tenant does not hold is ErrNotFound", getAbsent[*repoSubject]},
	{"Delete", "Delete removes the tenant's row; deleting an id it does not hold is ErrNotFound", removes[*repoSubject]},
	{"ListOrder", "List returns the tenant's own values ordered by id in byte order, in a slice the caller owns", listOrder[*repoSubject]},
	{"CrossTenant", "another tenant's row is out of reach: Get and Delete of it answer exactly as if it did not exist (ErrNotFound), List omits it, and it does not change", crossTenant[*repoSubject]},
	{"SharedIDs", "tenants that use one id hold separate rows: one's Put and Delete never touch the other's", sharedIDs[*repoSubject]},
	{"NoTenant", noTenantRule, noTenant[*repoSubject]},
	{"DoneContext", doneContextRule, doneContext[*repoSubject]},
	{"BadIDs", "a bad id is ErrInvalidID naming the id and changes nothing; an id of MaxIDLength bytes is accepted", badIDsRefused[*repoSubject]},
	{"Concurrent", "tenants calling at once each end with exactly their own rows", concurrent[*repoSubject]},
	{"StateMachine", keyedModelRule, keyedModel[*repoSubject]},
}

func putGet(s *suite[*repoSubject]) {
	a := tenant(s.t, "alice")
	values := map[string]string{"empty": "", "text": "renew the domain", "lines": "a\nb\tc", "unicode": "José ✓"}
	for id, v := range values {
		put(s, a, id, v)
	}
	for id, v := range values {
		wantRow(s, a, id, v)
	}
}
