package quorum

import (
	"errors"
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// luaProtos are the real scripts, compiled once for every fake.
var luaProtos = compileScripts()

func compileScripts() map[string]*lua.FunctionProto {
	out := map[string]*lua.FunctionProto{}
	for name, s := range luaScripts {
		chunk, err := parse.Parse(strings.NewReader(s.Source()), name)
		if err != nil {
			panic(fmt.Sprintf("script %s: %v", name, err))
		}
		proto, err := lua.Compile(chunk, name)
		if err != nil {
			panic(fmt.Sprintf("script %s: %v", name, err))
		}
		out[name] = proto
	}
	return out
}

// luaVM runs the real scripts the way Redis does, on one long-lived Lua
// state per fake master (building one per call, as an embedded EVAL does,
// costs more than the engine under test). redis.call dispatches each
// command to the fake's embedded master, so command semantics (expiry,
// KEEPTTL, PUBLISH) are miniredis's, not ours. Not safe for concurrent
// use: the fake calls it under its mutex.
type luaVM struct {
	L    *lua.LState
	exec func(cmd []string) (raw string, v any, err error)
	// luaOnly runs every script in Lua, plain forms left aside.
	luaOnly bool
	// plainMarkOff drops a plain form's follow-up step (the plain
	// acquire's raise of the lease mark) as if it had run: the
	// simulation's negative control for it.
	plainMarkOff bool
	// restFirst runs a plain form's later commands (the plain acquire's
	// INCR of the fence sequence and PTTL of the lease mark) before its
	// first (its SET): the simulation's negative control for the order
	// the fence argument needs.
	restFirst bool
}

func newLuaVM(exec func(cmd []string) (string, any, error)) *luaVM {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, RegistrySize: 1024, CallStackSize: 64})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	vm := &luaVM{L: L, exec: exec}
	redis := L.NewTable()
	redis.RawSetString("call", L.NewFunction(vm.call))
	L.SetGlobal("redis", redis)
	return vm
}

// call is redis.call: the reply converted as Redis converts it.
func (vm *luaVM) call(L *lua.LState) int {
	cmd := make([]string, L.GetTop())
	for i := range cmd {
		cmd[i] = lua.LVAsString(L.Get(i + 1))
	}
	raw, v, err := vm.exec(cmd)
	if err != nil {
		L.RaiseError("%s", err.Error())
		return 0
	}
	if strings.HasPrefix(raw, "+") {
		t := L.NewTable()
		t.RawSetString("ok", lua.LString(v.(string)))
		L.Push(t)
		return 1
	}
	L.Push(toLua(L, v))
	return 1
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LFalse
	case int:
		return lua.LNumber(x)
	case string:
		return lua.LString(x)
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	}
	return lua.LFalse
}

// run runs script name with keys and args and returns its reply as
// Node.Eval does (Lua numbers become integers, truncated, as in Redis).
// run runs the script called name as quorum/redisnode sends it: its
// plain form when it has one for these keys and arguments (unless luaOnly),
// else the script.
func (vm *luaVM) run(name string, keys, args []string) (any, error) {
	return vm.runApart(name, keys, args, nil)
}

// runApart is run, with apart (when set) called between the first
// command of a plain form's step and the others: the commands of a step
// are not atomic (other clients' commands may run between them, as
// between any two commands a master reads), and apart lets them run
// there (the simulation releases the master until a later time); it
// returns an error if the request is lost meanwhile.
func (vm *luaVM) runApart(name string, keys, args []string, apart func() error) (any, error) {
	if s, ok := luaScripts[name]; ok && !vm.luaOnly {
		if st := s.Plain(keys, args); st != nil {
			return vm.runPlain(name, st, keys, args, apart)
		}
	}
	return vm.runLua(name, keys, args)
}

// splitsApart reports whether runApart would call apart for this
// request: its script's plain form has more than one command.
func (vm *luaVM) splitsApart(name string, keys, args []string) bool {
	s, ok := luaScripts[name]
	if !ok || vm.luaOnly {
		return false
	}
	st := s.Plain(keys, args)
	return st != nil && len(st.Commands) > 1
}

// runPlain runs a plain form's steps, each command as its own call (an
// error reply is that command's reply, as on the wire), integers as
// int64 as quorum/redisnode reads them; apart as in runApart.
func (vm *luaVM) runPlain(name string, st *scripts.Step, keys, args []string, apart func() error) (any, error) {
	for {
		replies := make([]any, len(st.Commands))
		do := func(from, to int) {
			for i := from; i < to; i++ {
				_, v, err := vm.exec(st.Commands[i])
				if err != nil {
					replies[i] = err
				} else {
					replies[i] = wireInts(v)
				}
			}
		}
		switch n := len(st.Commands); {
		case apart == nil || n < 2:
			do(0, n)
		case vm.restFirst:
			do(1, n)
			if err := apart(); err != nil {
				return nil, err
			}
			do(0, 1)
		default:
			do(0, 1)
			if err := apart(); err != nil {
				return nil, err
			}
			do(1, n)
		}
		apart = nil // a follow-up step runs at once
		o := st.Then(replies)
		switch {
		case o.Next != nil && vm.plainMarkOff:
			o = o.Next.Then(make([]any, len(o.Next.Commands)))
			return o.Reply, o.Err
		case o.Next != nil:
			st = o.Next
		case o.Lua:
			return vm.runLua(name, keys, args)
		case o.Err != nil:
			return nil, o.Err
		default:
			return o.Reply, nil
		}
	}
}

// wireInts turns miniredis's parsed integers (int) into int64.
func wireInts(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case []any:
		for i := range x {
			x[i] = wireInts(x[i])
		}
	}
	return v
}

// runLua runs the script called name in Lua.
func (vm *luaVM) runLua(name string, keys, args []string) (any, error) {
	proto, ok := luaProtos[name]
	if !ok {
		return nil, fmt.Errorf("fake: no script %q", name)
	}
	L := vm.L
	L.SetGlobal("KEYS", strTable(L, keys))
	L.SetGlobal("ARGV", strTable(L, args))
	L.Push(L.NewFunctionFromProto(proto))
	if err := L.PCall(0, 1, nil); err != nil {
		return nil, errors.New("ERR " + err.Error())
	}
	v := L.Get(-1)
	L.Pop(1)
	return fromLua(v), nil
}

func strTable(L *lua.LState, s []string) *lua.LTable {
	t := L.CreateTable(len(s), 0)
	for _, x := range s {
		t.Append(lua.LString(x))
	}
	return t
}

func fromLua(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LNumber:
		return int64(x)
	case lua.LString:
		return string(x)
	case lua.LBool:
		if x {
			return int64(1)
		}
		return nil
	case *lua.LTable:
		if ok := x.RawGetString("ok"); ok != lua.LNil {
			return lua.LVAsString(ok)
		}
		out := make([]any, 0, x.Len())
		for i := 1; i <= x.Len(); i++ {
			out = append(out, fromLua(x.RawGetInt(i)))
		}
		return out
	}
	return nil
}
