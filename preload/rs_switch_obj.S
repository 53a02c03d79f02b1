/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The BPF switch's object file (rs_switch.bpf.o, path in RS_SWITCH_OBJ)
 * inside rdmastream-switch, so the tool is one file.
 */
	.section .rodata
	.balign 8
	.globl rs_switch_obj
rs_switch_obj:
	.incbin RS_SWITCH_OBJ
	.globl rs_switch_obj_end
rs_switch_obj_end:

	.section .note.GNU-stack, "", @progbits
