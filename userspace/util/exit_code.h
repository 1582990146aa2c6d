#pragma once
// Exit statuses of airlock itself (`airlock run` and `airlock exec` pass
// the command's through). docs/operations.md promises them.
namespace airlock {

enum ExitCode {
	kExitOk = 0,
	kExitFailure = 1,  // a command other than run failed
	kExitKilledOnViolation = 120,
	kExitKilledByOperator = 121,
	kExitAirlockError = 125,
	kExitCannotExecute = 126,
	kExitNotFound = 127,
};

}  // namespace airlock
