"""Math answer equivalence: extract -> normalize -> answer (shapes) -> compare (fast path, with
expression + evaluate) -> cas (slow path in killable workers) -> reward."""
