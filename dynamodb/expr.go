package rotadynamo

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// expr builds the attribute names and values of one expression (an update, a condition,
// a key condition), every name through a placeholder, since DynamoDB reserves hundreds of
// words.
type expr struct {
	names  map[string]string
	values map[string]av
	byName map[string]string
}

// n returns the placeholder of attribute a.
func (e *expr) n(a string) string {
	if p, ok := e.byName[a]; ok {
		return p
	}
	if e.names == nil {
		e.names, e.byName = map[string]string{}, map[string]string{}
	}
	p := "#" + strconv.Itoa(len(e.names))
	e.names[p], e.byName[a] = a, p
	return p
}

// v returns the placeholder of value x.
func (e *expr) v(x av) string {
	if e.values == nil {
		e.values = map[string]av{}
	}
	p := ":" + strconv.Itoa(len(e.values))
	e.values[p] = x
	return p
}

func (e *expr) valuesOrNil() map[string]av {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

func (e *expr) namesOrNil() map[string]string {
	if len(e.names) == 0 {
		return nil
	}
	return e.names
}

// update builds an UpdateItem: SET and REMOVE clauses and a condition, sharing one expr.
type update struct {
	e      expr
	sets   []string
	adds   []string
	rems   []string
	conds  []string
	keyMap map[string]av
}

func newUpdate(k map[string]av) *update { return &update{keyMap: k} }

// set sets attribute a to x.
func (u *update) set(a string, x av) *update {
	u.sets = append(u.sets, u.e.n(a)+" = "+u.e.v(x))
	return u
}

// setOrRemove sets a to x, or removes it when x is nil.
func (u *update) setOrRemove(a string, x av) *update {
	if x == nil {
		return u.remove(a)
	}
	return u.set(a, x)
}

func (u *update) remove(a string) *update {
	u.rems = append(u.rems, u.e.n(a))
	return u
}

// add adds x to the number or set a.
func (u *update) add(a string, x av) *update {
	u.adds = append(u.adds, u.e.n(a)+" "+u.e.v(x))
	return u
}

// cond adds a condition, written with the placeholders that f returns for the names and
// values it asks for.
func (u *update) cond(f func(e *expr) string) *update {
	u.conds = append(u.conds, f(&u.e))
	return u
}

func (u *update) expression() *string {
	var parts []string
	if len(u.sets) > 0 {
		parts = append(parts, "SET "+strings.Join(u.sets, ", "))
	}
	if len(u.rems) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(u.rems, ", "))
	}
	if len(u.adds) > 0 {
		parts = append(parts, "ADD "+strings.Join(u.adds, ", "))
	}
	s := strings.Join(parts, " ")
	return &s
}

func (u *update) condition() *string {
	if len(u.conds) == 0 {
		return nil
	}
	s := "(" + strings.Join(u.conds, ") AND (") + ")"
	return &s
}

// input is the update as an UpdateItemInput.
func (u *update) input() *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{Key: u.keyMap, UpdateExpression: u.expression(), ConditionExpression: u.condition(),
		ExpressionAttributeNames: u.e.namesOrNil(), ExpressionAttributeValues: u.e.valuesOrNil()}
}

// action is the update as an action of a transaction.
func (u *update) action() types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		Key: u.keyMap, UpdateExpression: u.expression(), ConditionExpression: u.condition(),
		ExpressionAttributeNames: u.e.namesOrNil(), ExpressionAttributeValues: u.e.valuesOrNil(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// putAction is a Put of item m under the condition f makes (none when f is nil).
func putAction(m map[string]av, f func(e *expr) string) types.TransactWriteItem {
	p := &types.Put{Item: m, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues = condition(f)
	return types.TransactWriteItem{Put: p}
}

// deleteAction is a Delete of the item k under the condition f makes (none when f is nil).
func deleteAction(k map[string]av, f func(e *expr) string) types.TransactWriteItem {
	d := &types.Delete{Key: k, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues = condition(f)
	return types.TransactWriteItem{Delete: d}
}

// condition is the condition f makes, with its names and values; nothing when f is nil.
func condition(f func(e *expr) string) (*string, map[string]string, map[string]av) {
	if f == nil {
		return nil, nil, nil
	}
	var e expr
	c := f(&e)
	return &c, e.namesOrNil(), e.valuesOrNil()
}
