; Inno Setup 6 script for the Windows installer. packaging/build.py runs it as
;   iscc /DAppVersion=0.1.0 /DSourceDir=<build\dist\offline-assistant> /DOutputDir=<dir> offline-assistant.iss
; and expects <OutputDir>\OfflineAssistant-<AppVersion>-setup.exe.

; x64compatible needs 6.3; older compilers would fail later with a less helpful message.
#if VER < EncodeVer(6, 3, 0)
  #error Inno Setup 6.3 or newer is required
#endif
#ifndef AppVersion
  #error AppVersion is not defined: build with packaging/build.py
#endif
#ifndef SourceDir
  #error SourceDir is not defined: build with packaging/build.py
#endif
#ifndef OutputDir
  #error OutputDir is not defined: build with packaging/build.py
#endif

#define AppName "Offline Assistant"
#define AppExe "offline-assistant.exe"
; The app keeps the user's data in %LOCALAPPDATA%\<this> (platformdirs.user_data_dir with
; appauthor=False); it must match APP_NAME in engine/paths.py.
#define DataFolderName "OfflineAssistant"

[Setup]
; Identifies the app across versions (upgrades, Apps & features): never change it.
AppId={{4D63EC0C-D6D9-4120-8446-F310B07426BB}
AppName={#AppName}
AppVersion={#AppVersion}
AppPublisher=Offline Assistant developers
UninstallDisplayName={#AppName}
UninstallDisplayIcon={app}\{#AppExe}
; Per user by default (no UAC prompt; {autopf} is then %LOCALAPPDATA%\Programs), and the
; opening dialog (or /ALLUSERS) offers an all-users install into Program Files instead.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
DefaultDirName={autopf}\{#AppName}
; The shortcut goes straight into the Start menu, so there is no folder to choose.
DisableProgramGroupPage=yes
; The frozen app is 64-bit only; 64-bit mode also makes {autopf} the native Program Files.
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
; Qt 6 needs Windows 10; refuse cleanly instead of failing at the first start.
MinVersion=10.0
WizardStyle=modern
Compression=lzma2
SolidCompression=yes
OutputDir={#OutputDir}
OutputBaseFilename=OfflineAssistant-{#AppVersion}-setup

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[InstallDelete]
; An upgrade must not mix the previous build's libraries with the new ones.
Type: filesandordirs; Name: "{app}\_internal"

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#AppExe}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; Tasks: desktopicon

[Run]
; A postinstall entry runs with the credentials of the user who started Setup (runasoriginaluser
; is its default), so after an all-users install the first start still creates that user's data
; folder, not an administrator's.
Filename: "{app}\{#AppExe}"; Description: "Start {#AppName}"; Flags: nowait postinstall skipifsilent

[Code]
function DataDir: String;
begin
  Result := ExpandConstant('{localappdata}\{#DataFolderName}');
end;

// Windows paths compare case-insensitively; the trailing backslash keeps "...\OfflineAssistant2"
// from counting as inside "...\OfflineAssistant".
function IsSameOrInside(const Path, Folder: String): Boolean;
begin
  Result := Pos(Lowercase(AddBackslash(Folder)), Lowercase(AddBackslash(Path))) = 1;
end;

// The uninstaller removes the install folder and the user may ask it to delete the data
// folder: neither may hold the other.
function OverlapsDataDir(const Dir: String): Boolean;
begin
  Result := IsSameOrInside(Dir, DataDir) or IsSameOrInside(DataDir, Dir);
end;

function DataDirMessage: String;
begin
  Result := 'Offline Assistant keeps your indexed manuals, conversations, settings and logs in' + #13#10 +
    DataDir + #13#10#13#10 + 'Please choose an install folder that neither is that folder, nor lies inside it, nor contains it.';
end;

function NextButtonClick(CurPageID: Integer): Boolean;
begin
  Result := True;
  if (CurPageID = wpSelectDir) and OverlapsDataDir(WizardDirValue) then
  begin
    SuppressibleMsgBox(DataDirMessage, mbError, MB_OK, IDOK);
    Result := False;
  end;
end;

// Also catches /DIR= on a silent install and a directory page skipped on upgrade.
function PrepareToInstall(var NeedsRestart: Boolean): String;
begin
  Result := '';
  if OverlapsDataDir(WizardDirValue) then
    Result := DataDirMessage;
end;

// The user's data outlives the app unless they say otherwise; a silent uninstall never asks,
// so it keeps the data.
procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
begin
  if (CurUninstallStep = usPostUninstall) and not UninstallSilent and DirExists(DataDir) then
  begin
    if MsgBox('Also delete your indexed manuals, conversations, settings and logs?' + #13#10#13#10 +
        DataDir + #13#10#13#10 + 'Choose No to keep them: Offline Assistant finds them again if you reinstall it.',
        mbConfirmation, MB_YESNO or MB_DEFBUTTON2) = IDYES then
    begin
      if not DelTree(DataDir, True, True, True) then
        MsgBox('Some files in ' + DataDir + ' could not be deleted (is Offline Assistant still running?).' +
          #13#10 + 'You can delete that folder yourself.', mbError, MB_OK);
    end;
  end;
end;
