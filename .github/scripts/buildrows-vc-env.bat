@echo off
rem Rendered by `buildrows workflow` for examples/executorch/buildrows.toml. Do not edit by hand.
rem test-infra's env-script on Windows: runs its arguments in a Visual Studio developer environment
rem (x64), so the hook and the build both see cl and clang-cl beside ninja and take the Ninja route.
set "VSWHERE=%ProgramFiles(x86)%\Microsoft Visual Studio\Installer\vswhere.exe"
set "VSINSTALL="
for /f "usebackq tokens=*" %%i in (`"%VSWHERE%" -latest -products * -requires Microsoft.VisualStudio.Component.VC.Tools.x86.x64 -property installationPath`) do set "VSINSTALL=%%i"
if not defined VSINSTALL (
  echo buildrows: vswhere found no Visual Studio with the C++ tools 1>&2
  exit /b 4
)
call "%VSINSTALL%\VC\Auxiliary\Build\vcvarsall.bat" x64 >nul || exit /b 4
set DISTUTILS_USE_SDK=1
%*
exit /b %ERRORLEVEL%
