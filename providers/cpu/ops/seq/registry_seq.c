/*
 * registry_seq: the CPU provider's sequence, optional and string ops, one
 * line each.  registry.c searches this table before every other: its
 * Identity, Cast and CastLike take sequences, optionals and strings and
 * hand plain tensors to the main table's entries.
 */
#include <stddef.h>

#include "seq_ops.h"

const cpu_op *const cpu_ops_seq[] = {
	&cpu_op_seq_identity,
	&cpu_op_seq_cast,
	&cpu_op_seq_castlike,
	&cpu_op_sequenceempty,
	&cpu_op_sequenceconstruct,
	&cpu_op_sequenceinsert,
	&cpu_op_sequenceat,
	&cpu_op_sequenceerase,
	&cpu_op_sequencelength,
	&cpu_op_splittosequence,
	&cpu_op_concatfromsequence,
	&cpu_op_optional,
	&cpu_op_optionalhaselement,
	&cpu_op_optionalgetelement,
	&cpu_op_stringnormalizer,
	NULL,
};
