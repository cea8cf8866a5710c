// rlm's JavaScript prelude, part 4/4 (seal): what the engine calls once, after the
// other parts and before any model code, to keep model code from changing what the
// host relies on: the prelude's own functions, and the built-in prototypes.
//
// Every object inherits from the built-in prototypes — the helpers' arguments and
// replies, and the objects the engine itself makes: a cell's completion record is a
// plain object whose `value` the engine assigns and whose `then` it looks up. A
// getter on `Object.prototype.value` broke every later cell; a `then` made every
// object a thenable; a `toJSON` reshaped what the host was sent; a setter caught the
// arguments the helpers assemble. So the built-in prototypes take no new properties
// (`Object.preventExtensions`): cells are strict code, so an assignment or definition
// that would add one throws a TypeError (which the engine explains). Their existing
// methods may still be replaced in the model's own world; the prelude reads only its
// private copies, and what every `await` and the engine's wait on a cell read
// (`Promise.prototype.then`, `Promise.prototype.constructor`, `Promise[Symbol.species]`)
// is fixed.
"use strict";

/** Every built-in prototype: `Function.prototype`, each built-in global
 * constructor's `prototype` and what that inherits, and the prototypes only reached
 * from instances (iterators, generators, async functions). */
function __rlm_intrinsic_prototypes() {
  const found = new Set();
  const list = [];
  const add = (proto) => {
    while (proto !== null && (typeof proto === "object" || typeof proto === "function") && !found.has(proto)) {
      found.add(proto);
      list.push(proto);
      proto = Object.getPrototypeOf(proto);
    }
  };
  add(Function.prototype);
  const source = Function.prototype.toString;
  const names = Object.getOwnPropertyNames(globalThis);
  for (let i = 0; i < names.length; i++) {
    const value = globalThis[names[i]];
    // The engine's own constructors, not the prelude's (`HostError`, `peek`, …).
    if (typeof value !== "function" || !source.call(value).includes("[native code]")) continue;
    const own = Object.getOwnPropertyDescriptor(value, "prototype");
    if (own !== undefined && own.value !== null && typeof own.value === "object") {
      add(own.value);
    }
  }
  const instances = [
    [][Symbol.iterator](),
    ""[Symbol.iterator](),
    new Map().entries(),
    new Set().values(),
    /x/[Symbol.matchAll](""),
    (function* () {})(),
    (async function* () {})(),
    function* () {},
    async function () {},
    async function* () {},
    async () => {},
  ];
  if (typeof Iterator === "function" && typeof Iterator.prototype.map === "function") {
    instances.push(Iterator.prototype.map.call([].values(), (x) => x));
  }
  if (typeof Iterator === "function" && typeof Iterator.from === "function") {
    instances.push(Iterator.from({ next: () => ({ done: true, value: undefined }) }));
  }
  for (let i = 0; i < instances.length; i++) add(Object.getPrototypeOf(instances[i]));
  return list;
}

/** Records every global that exists now as provided (called once the prelude and the
 * built-ins are in place), makes the prelude's own plumbing (`__rlm_*` functions the
 * host calls) unchangeable, so model code cannot replace what the host runs — only
 * `__rlm_final`, where FINAL_VAR and SUBMIT leave the answer, stays writable — and
 * closes the built-in prototypes (see the top of this file). */
globalThis.__rlm_seal = function () {
  const safe = __rlm_safe;
  const names = safe.names(globalThis);
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    safe.mapSet(__rlm_base, name, globalThis[name]);
    if (safe.startsWith(name, "__rlm_") && name !== "__rlm_final" && name !== "__rlm_base") {
      safe.defineProperty(globalThis, name, { writable: false, configurable: false });
    }
  }
  // Read by every `await` (is this a promise of ours?) and by the engine waiting on a
  // cell (`then`, which reads the species).
  Object.defineProperty(Promise.prototype, "then", { writable: false, configurable: false });
  Object.defineProperty(Promise.prototype, "constructor", { writable: false, configurable: false });
  Object.defineProperty(Promise, Symbol.species, { configurable: false });
  const prototypes = __rlm_intrinsic_prototypes();
  for (let i = 0; i < prototypes.length; i++) Object.preventExtensions(prototypes[i]);
};
