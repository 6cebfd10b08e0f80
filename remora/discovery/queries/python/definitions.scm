; Every class and function definition, at any depth (async defs are function_definition too).
; Whether a function is a method and its qualified name depend on what encloses it, which the
; parser works out from the byte ranges.
(class_definition
  name: (identifier)) @definition.class

(function_definition
  name: (identifier)) @definition.function

; A decorated definition's range starts at its first decorator.
(decorated_definition) @decorated
