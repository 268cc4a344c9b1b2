// common.glsl: helpers every 1-D shader includes after its local size.
// A 1-D launch spreads its workgroups over x and y (x is capped at 65535
// groups), so flat_id() rebuilds the element index.
uint flat_id()
{
	return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
	       gl_LocalInvocationID.x;
}

// The index of a workgroup (one row of a row-wise kernel) in a 2-D launch.
uint flat_group()
{
	return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
}
